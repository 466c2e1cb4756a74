"""Team mode of the annotation page (``microg4m team``): for a lab server.

* accounts with a role (``annotator`` / ``adjudicator``), managed from the command line
  (accounts.py); server-side sessions in secure HTTP-only cookies, a CSRF token on every
  state-changing request (server.py);
* double annotation: each kept clip is assigned to k annotators (assign.py); each
  annotator reads and writes only their own labels, on the same page as single-user mode;
* adjudication: clips whose annotators disagree, side by side, and the final labels
  (decisions.py), which alone go to the two files the workflow reads;
* a durable history in SQLite (db.py, history.py): every change appended (who, when,
  clip, person, before, after); the files can be rebuilt from it at any time;
* agreement figures per annotator and per action, with today's ``microg4m agreement``
  measures (report.py).

Single-user mode (``microg4m annotate``) does not use any of this.
"""
