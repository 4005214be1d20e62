"""What the standard-library harnesses in bench/ share (acceptance-fit.py,
spec-validate.py, amd-validate.py, lora-validate.py): one error type for bad
input and one CSV reader that names the file and line of every row."""

import csv


class BadInput(Exception):
    """One line naming the file, the line and what was expected."""


def read_csv(path, need):
    """The rows of a CSV file as dicts, each with "_where" (file:line);
    every column of need must be in the header.  BadInput otherwise, or when
    the file cannot be read or is not CSV."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rd = csv.DictReader(f)
            missing = [c for c in need if c not in (rd.fieldnames or [])]
            if missing:
                raise BadInput("%s:1: expected columns %s" % (path, ", ".join(missing)))
            rows = []
            for row in rd:
                row["_where"] = "%s:%d" % (path, rd.line_num)
                rows.append(row)
            return rows
    except OSError as e:
        raise BadInput("%s: %s" % (path, e.strerror))
    except (csv.Error, UnicodeDecodeError) as e:
        raise BadInput("%s: %s" % (path, e))
