"""Checks an HTML report written by ember as a browser would take it: the page parses, every
inline SVG is well-formed XML, and nothing would be fetched (no src, no link, no url(...), no
http(s) reference). Prints what it found for the C test to check:
  svgs N / external N / polyline POINTS FIRST_X,FIRST_Y LAST_X,LAST_Y / bar WIDTH / cell TEXT
usage: report_check.py REPORT.html"""
import re
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

page = open(sys.argv[1], encoding="utf-8").read()


class Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.cells, self.in_cell = [], False

    def handle_starttag(self, tag, attrs):
        self.in_cell = tag == "td"
        if self.in_cell:
            self.cells.append("")

    def handle_data(self, data):
        if self.in_cell:
            self.cells[-1] += data

    def handle_endtag(self, tag):
        if tag == "td":
            self.in_cell = False


parser = Cells()
parser.feed(page)
parser.close()
svgs = re.findall(r"<svg .*?</svg>", page, re.S)
print("svgs", len(svgs))
print("external", len(re.findall(r"src=|<link|url\(|https?:", page)))
for svg in svgs:
    root = ET.fromstring(svg)
    for el in root.iter():
        if el.tag == "polyline":
            pts = el.get("points").split()
            print("polyline", len(pts), pts[0], pts[-1])
        elif el.tag == "rect" and el.get("height") != "12":
            print("bar", el.get("width"))
for cell in parser.cells:
    print("cell", cell)
