#!/usr/bin/python3
"""tests/gate/render.py FILE HOST: render FILE as Markdown the way chat UIs
do -- cmark (CommonMark), cmark-gfm with its autolink extension (GitHub),
Python-Markdown -- with raw HTML let through, and print one line per
element attribute in the HTML that names HOST ("cmark img src=..."), so
the caller can say "nothing would be fetched from or linked to HOST".
Every attribute counts (src, href, srcset, style, poster, ...): a
renderer that lets one through is a request to HOST when a browser shows
the page.  Prints "renderers: N" (how many ran) last.
"""
import html.parser
import shutil
import subprocess
import sys

path, host = sys.argv[1], sys.argv[2].lower()
text = open(path, 'rb').read()


class Attrs(html.parser.HTMLParser):
    def __init__(self, who):
        super().__init__(convert_charrefs=True)
        self.who = who

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if v is not None and host in v.lower():
                print('%s %s %s=%s' % (self.who, tag, k, v))

    handle_startendtag = handle_starttag


renderers = []
if shutil.which('cmark'):
    renderers.append(('cmark', lambda t: subprocess.run(
        ['cmark', '--unsafe'], input=t, capture_output=True,
        check=True).stdout.decode('utf-8', 'replace')))
if shutil.which('cmark-gfm'):
    renderers.append(('cmark-gfm', lambda t: subprocess.run(
        ['cmark-gfm', '--unsafe', '-e', 'autolink', '-e', 'table'],
        input=t, capture_output=True, check=True).stdout.decode(
        'utf-8', 'replace')))
try:
    import markdown
    renderers.append(('python-markdown', lambda t: markdown.markdown(
        t.decode('utf-8', 'replace'))))
except ImportError:
    pass
for who, render in renderers:
    p = Attrs(who)
    p.feed(render(text))
    p.close()
print('renderers: %d' % len(renderers))
