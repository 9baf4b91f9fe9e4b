#!/bin/sh
# The renderer's medians in JavaScriptCore (WebKitGTK's engine): bundles bench/markdown-jsc.entry.ts
# and runs it through the JavaScriptCore GObject bindings (Debian: python3-gi,
# gir1.2-javascriptcoregtk-4.1). Prints JSON: per text, its size and the median ms, plain and coloured.
set -e
cd "$(dirname "$0")/.."
out="$(mktemp --suffix=.js)"
trap 'rm -f "$out"' EXIT
node_modules/.bin/rolldown bench/markdown-jsc.entry.ts --format iife --file "$out" >/dev/null
/usr/bin/python3 - "$out" <<'PY'
import sys
import gi
gi.require_version("JavaScriptCore", "4.1")
from gi.repository import JavaScriptCore
context = JavaScriptCore.Context()
context.evaluate(open(sys.argv[1]).read(), -1)
error = context.get_exception()
print(error.to_string() if error else context.evaluate("result", -1).to_string())
PY
