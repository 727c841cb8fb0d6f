"""placeholder"""
from . import Format
FORMAT = "rocpd"
INFO = Format(FORMAT, "rocpd", (".db",), "", "")
def detect(head, name):
    return False
