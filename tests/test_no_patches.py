"""`worked` changes nothing of any other library: after importing it, solving, rendering every format and
checking answers, the functions, attributes and settings of its dependencies are the same objects and values
as before (run in a fresh interpreter, so nothing else has imported them first)."""
from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = r'''
import gc, json, sys
import sympy, mpmath, jinja2, xml.etree.ElementTree as ET, argparse, numpy
mods = {"sympy": sympy, "sympy.core.expr": sympy.core.expr, "sympy.printing.str": sympy.printing.str,
        "sympy.printing.latex": sympy.printing.latex, "mpmath": mpmath, "jinja2": jinja2,
        "jinja2.environment": jinja2.environment, "xml.etree.ElementTree": ET, "argparse": argparse, "numpy": numpy}
extra = {}
for name in ("latex2mathml.converter", "latex2mathml.tokenizer", "ziamath", "ziamath.nodes", "weasyprint",
             "weasyprint.svg", "weasyprint.pdf.fonts", "weasyprint.images"):
    try:
        extra[name] = __import__(name, fromlist=["_"])
    except Exception:
        pass
mods.update(extra)

def snap():
    out = {}
    for name, m in mods.items():
        for k, v in list(vars(m).items()):
            out[f"{name}.{k}"] = id(v)
            if isinstance(v, type):
                for a, x in list(vars(v).items()):
                    out[f"{name}.{k}.{a}"] = id(x)
            if isinstance(v, dict) and k.isupper():
                out[f"{name}.{k}[]"] = repr(sorted(map(str, v.items())))
    out["mpmath.mp.dps"] = mpmath.mp.dps
    out["mpmath.mp.prec"] = mpmath.mp.prec
    out["gc.threshold"] = gc.get_threshold()
    out["gc.frozen"] = gc.get_freeze_count()
    return out

before = snap()
import worked
from worked.check import check_answers
from worked.render import answer_key_html, worksheet_html, answer_key_tex, worksheet_tex, answer_key_pdf
sol = worked.solve(worked.Problem.from_file(sys.argv[1]), checks="all")
answer_key_html(sol); worksheet_html(sol); answer_key_tex(sol); worksheet_tex(sol)
answer_key_html(sol, for_pdf=True)
try:
    answer_key_pdf(sol)
except Exception as exc:
    print("pdf skipped:", exc, file=sys.stderr)
sol.text(); sol.to_dict()
check_answers(sol.problem, {"scaled": [["1.41", "2.83", "1.41"], ["2.12", "2.12", "2.12"], ["1.41", "2.12", "1.41"]]})
after = snap()
changed = sorted(k for k in before if k in after and before[k] != after[k])
print(json.dumps(changed))
'''


def test_dependencies_are_untouched():
    run = subprocess.run([sys.executable, "-c", SCRIPT, "problems/cats-chase-mice.toml"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    changed = json.loads(run.stdout.strip().splitlines()[-1])
    assert changed == [], changed
