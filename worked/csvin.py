"""Reading CSV files as spreadsheets save them: the delimiter is detected (comma, semicolon as European
Excel writes, or tab) with the csv module's Sniffer."""
from __future__ import annotations

import csv
import re

DELIMITERS = ",;\t"


def delimiter(text: str) -> str:
    """The delimiter of the CSV *text*, judged from its header line (commas inside brackets, as in the
    column ``scores[2,3]``, do not count); a comma when the header has no other candidate."""
    head = text.lstrip("\ufeff").split("\n", 1)[0].rstrip("\r")
    plain = re.sub(r"\[[^\]]*\]", "", re.sub(r'"[^"]*"', '""', head))
    if not any(d in plain for d in DELIMITERS):
        return ","
    try:
        return csv.Sniffer().sniff(plain, delimiters=DELIMITERS).delimiter
    except csv.Error:
        return ","
