"""The `csv-table` kind: counts the rows and columns of the CSV table the runner fetched.
A table whose rows differ in length, or that is not UTF-8, fails with a message saying where."""
import csv
import json
import sys


def main():
    request = json.load(sys.stdin)
    header = request["job"].get("header", True)
    rows = 0
    columns = None
    names = []
    try:
        with open(request["payload"], newline="", encoding="utf-8") as table:
            for number, row in enumerate(csv.reader(table), start=1):
                if columns is None:
                    columns = len(row)
                    if header:
                        names = row
                        continue
                elif len(row) != columns:
                    print(json.dumps({"status": "failed",
                                      "error": "row %d has %d columns, but the table has %d" % (number, len(row), columns)}))
                    return
                rows += 1
    except (UnicodeDecodeError, csv.Error) as error:
        print(json.dumps({"status": "failed", "error": "expected a CSV table: %s" % error}))
        return
    details = {"rows": rows, "columns": columns or 0}
    if header:
        details["header"] = names
    print(json.dumps({"status": "succeeded", "details": details}))


main()
