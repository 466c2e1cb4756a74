"""The annotation page: screen the kept clips and label each tracked person's actions.

``microg4m annotate`` (or ``python -m microg4m.annotate``) serves a local page over the
results folder of a run. Labels go to the actions CSV (released ``actions.csv`` schema)
and exclusions to the screening file, the two files the workflow reads.
``microg4m agreement`` compares and merges the actions files of several annotators.
"""
