"""``croissant.json``: the release described in Croissant 1.1 (MLCommons) with the
Responsible-AI vocabulary (``rai:``), so that loaders (mlcroissant, TFDS, PyTorch) read its
tables by their record sets and a reviewer finds its provenance and its RAI answers.

Every table is a ``cr:FileSet`` of its Parquet files (relative to this file) and a record
set with one field per column; the split of a per-split table's row comes from its file's
name; a record set ``splits`` (``cr:Split``) names the splits. The video files and the
WebDataset shards are file sets too. What only the authors can say carries
:data:`~microg4m.release.metadata.AUTHORS`.
"""

from __future__ import annotations

from microg4m.formats.splits import SPLITS
from microg4m.release.metadata import AUTHORS
from microg4m.release.tables import TABLES

CONFORMS_TO = "http://mlcommons.org/croissant/1.1"
RAI_CONFORMS_TO = "http://mlcommons.org/croissant/RAI/1.0"
CONTEXT = {
    "@language": "en", "@vocab": "https://schema.org/", "arrayShape": "cr:arrayShape", "citeAs": "cr:citeAs",
    "column": "cr:column", "conformsTo": "dct:conformsTo", "containedIn": "cr:containedIn",
    "cr": "http://mlcommons.org/croissant/", "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"}, "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/", "description": {"@container": "@language"},
    "equivalentProperty": "cr:equivalentProperty", "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract", "field": "cr:field", "fileProperty": "cr:fileProperty", "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet", "format": "cr:format", "includes": "cr:includes", "isArray": "cr:isArray",
    "isLiveDataset": "cr:isLiveDataset", "jsonPath": "cr:jsonPath", "key": "cr:key", "md5": "cr:md5",
    "name": {"@container": "@language"}, "parentField": "cr:parentField", "path": "cr:path",
    "recordSet": "cr:recordSet", "references": "cr:references", "regex": "cr:regex", "repeated": "cr:repeated",
    "replace": "cr:replace", "samplingRate": "cr:samplingRate", "sc": "https://schema.org/",
    "separator": "cr:separator", "source": "cr:source", "subField": "cr:subField", "transform": "cr:transform",
}
DATA_TYPES = {"string": "sc:Text", "int": "sc:Integer", "float": "sc:Float", "bool": "sc:Boolean"}
PARQUET = "application/x-parquet"
# Hub licence ids -> their URLs (others are given as they are)
LICENCE_URLS = {
    "cc-by-4.0": "https://creativecommons.org/licenses/by/4.0/",
    "cc-by-sa-4.0": "https://creativecommons.org/licenses/by-sa/4.0/",
    "cc-by-nc-4.0": "https://creativecommons.org/licenses/by-nc/4.0/",
    "cc-by-nc-sa-4.0": "https://creativecommons.org/licenses/by-nc-sa/4.0/",
    "cc0-1.0": "https://creativecommons.org/publicdomain/zero/1.0/",
    "odc-by": "https://opendatacommons.org/licenses/by/1-0/",
    "cdla-permissive-2.0": "https://cdla.dev/permissive-2-0/",
    "mit": "https://opensource.org/licenses/MIT",
    "apache-2.0": "https://www.apache.org/licenses/LICENSE-2.0",
}


def _creators(meta: dict) -> list[dict]:
    out = []
    for c in meta.get("creators", []):
        node = {"@type": "sc:Organization" if c.get("organization") else "sc:Person", "name": c["name"]}
        for key, prop in (("url", "url"), ("email", "email")):
            if c.get(key):
                node[prop] = c[key]
        if c.get("affiliation"):
            node["affiliation"] = {"@type": "sc:Organization", "name": c["affiliation"]}
        out.append(node)
    return out or [{"@type": "sc:Person", "name": f"{AUTHORS} the dataset's creators"}]


def _field(table: str, name: str, kind: str, description: str, source: dict) -> dict:
    return {"@type": "cr:Field", "@id": f"{table}/{name}", "name": name, "description": description,
            "dataType": DATA_TYPES[kind], "source": source}


def record_sets(present: dict[str, list[str]]) -> tuple[list[dict], list[dict]]:
    """(distribution, record sets) of the tables written: ``present`` = table -> its files."""
    dist, sets = [], []
    split_names = sorted({f.rsplit("/", 1)[1].removesuffix(".parquet") for t, files in present.items()
                          if TABLES[t].per_split for f in files}, key=SPLITS.index)
    sets.append({"@type": "cr:RecordSet", "@id": "splits", "name": "splits", "dataType": "cr:Split",
                 "description": "The splits of the release (every clip is in one).",
                 "key": {"@id": "splits/name"},
                 "field": [{"@type": "cr:Field", "@id": "splits/name", "name": "name", "dataType": "sc:Text"}],
                 "data": [{"splits/name": s} for s in split_names]})
    for name, files in present.items():
        t = TABLES[name]
        fs = f"{name}-parquet"
        dist.append({"@type": "cr:FileSet", "@id": fs, "name": fs, "encodingFormat": PARQUET,
                     "includes": f"data/{name}/*.parquet" if t.per_split else f"data/{name}.parquet",
                     "description": f"The Parquet file(s) of table {name}."})
        fields = [_field(name, c.name, c.kind, c.description, {"fileSet": {"@id": fs}, "extract": {"column": c.name}})
                  for c in t.columns]
        if t.per_split:
            # the pattern also takes the bare split name: mlcroissant 1.1.1 applies the transform again to the
            # value it extracted when it joins the field to the splits record set
            split = _field(name, "split", "string", "The split (from the file's name).",
                           {"fileSet": {"@id": fs}, "extract": {"fileProperty": "filename"},
                            "transform": {"regex": r"^(train|val|test)(?:\.parquet)?$"}})
            split["references"] = {"field": {"@id": "splits/name"}}
            fields.append(split)
        key = [{"@id": f"{name}/{k}"} for k in t.key]
        sets.append({"@type": "cr:RecordSet", "@id": name, "name": name, "description": t.description,
                     "key": key[0] if len(key) == 1 else key, "field": fields})
    return dist, sets


def build(*, meta: dict, description: str, version: str, date: str, licence: str, rai: dict,
          present: dict[str, list[str]], videos: bool, shards: bool, keywords: list[str]) -> dict:
    dist, sets = record_sets(present)
    if videos:
        dist.append({"@type": "cr:FileSet", "@id": "videos", "name": "videos", "encodingFormat": "video/mp4",
                     "includes": "videos/*/*.mp4",
                     "description": "The clips whose source's licence allows it, as H.264 mp4 (table clips, column "
                                    "video)."})
    if shards:
        dist.append({"@type": "cr:FileSet", "@id": "shards", "name": "shards", "encodingFormat": "application/x-tar",
                     "includes": "shards/*.tar",
                     "description": "WebDataset shards: one sample per clip (<clip>.json, and <clip>.mp4 when "
                                    "its video is released)."})
    doc = {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": [CONFORMS_TO, RAI_CONFORMS_TO],
        "name": meta.get("name") or "microg4m dataset",
        "description": description,
        "url": meta.get("url") or f"https://huggingface.co/datasets/{AUTHORS.strip('[]').replace(' ', '_')}",
        "version": version,
        "datePublished": date,
        "license": LICENCE_URLS.get(licence, licence),
        "citeAs": meta.get("citation") or f"{AUTHORS} a BibTeX entry for the dataset",
        "creator": _creators(meta),
        "keywords": keywords,
        "isLiveDataset": False,
    }
    doc.update({f"rai:{k}": v for k, v in rai.items()})
    doc["distribution"] = dist
    doc["recordSet"] = sets
    return doc
