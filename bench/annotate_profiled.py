"""``microg4m team serve`` with every request profiled (cProfile), for bench_annotate.py --profile.

    python bench/annotate_profiled.py OUT_DIR microg4m.cli team serve [options]

Each request runs under its own profiler in the thread that answers it (a frame's decode
runs in a thread of its own and shows as the wait for it); at the clean stop (SIGTERM)
the profiles of each request kind are merged into ``OUT_DIR/<kind>.prof`` and
``OUT_DIR/<kind>.txt`` (the top functions by own time and by cumulative time, and the
number of requests).
"""

from __future__ import annotations

import cProfile
import importlib
import io
import pstats
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from annotate_client import kind_of  # noqa: E402

TOP = 35


def main() -> int:
    out, module, rest = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    import microg4m.annotate.team.server as team_server

    profiles: dict[str, list[cProfile.Profile]] = {}
    lock = threading.Lock()
    create_app = team_server.create_app

    def profiled_app(*a, **kw):
        app = create_app(*a, **kw)
        inner = app.wsgi_app

        def wsgi(environ, start_response):
            kind = kind_of(environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""))
            prof = cProfile.Profile()
            prof.enable()
            try:
                return list(inner(environ, start_response))  # the body made inside the profile
            finally:
                prof.disable()
                with lock:
                    profiles.setdefault(kind, []).append(prof)

        app.wsgi_app = wsgi
        return app

    team_server.create_app = profiled_app  # cli.serve imports it when it serves
    try:
        return importlib.import_module(module).main(rest)
    finally:
        out.mkdir(parents=True, exist_ok=True)
        for kind, profs in profiles.items():
            stats = pstats.Stats(profs[0])
            for p in profs[1:]:
                stats.add(p)
            stats.dump_stats(out / f"{kind}.prof")
            text = io.StringIO()
            text.write(f"{kind}: {len(profs)} requests\n")
            for order in ("tottime", "cumulative"):
                pstats.Stats(str(out / f"{kind}.prof"), stream=text).sort_stats(order).print_stats(TOP)
            (out / f"{kind}.txt").write_text(text.getvalue())


if __name__ == "__main__":
    sys.exit(main())
