"""The benches' JSON lines files (``bench/results/*.jsonl``): the one writer.

Every bench appends one JSON object a line, so a file holds every run made with it and a
reader compares runs by their ``machine`` and ``note`` fields.
"""

import json


def append_records(path, records):
    """Append ``records`` (dicts of JSON values) to the JSON lines file ``path``, one a line."""
    with open(path, "a") as fh:
        for rec in records:
            fh.write(json.dumps(rec) + "\n")
