"""docs/python_api.md is the reference generated from the package's stubs and modules
(scripts/gen_python_api.py); it must match them, and every name the package exports is in it."""
import subprocess
import sys

import kvcompact
from conftest import ROOT


def test_api_reference_is_current_and_complete():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_python_api.py"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    doc = (ROOT / "docs" / "python_api.md").read_text()
    for name in kvcompact.__all__:
        if name != "__version__":
            assert f"kvcompact.{name}" in doc, name
