"""client/python/install.sh: one command makes a virtual environment with Debian's packages
and installs the client from the build tree, offline; the installed package talks to the
server from any directory."""
from __future__ import annotations

import os
import pathlib
import subprocess

import fairvault
from conftest import ROOT


def test_install_script_makes_a_working_environment(vault_server, tmp_path) -> None:
    # This test imports fairvault from <build>/client/python/fairvault (links and stubs).
    build = pathlib.Path(fairvault.__file__).parents[3]
    assert (build / "CMakeCache.txt").exists(), build
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PIP_NO_INDEX"] = "1"  # offline: any download attempt fails the test
    subprocess.run([str(ROOT / "client" / "python" / "install.sh"), str(venv), "--build-dir",
                    str(build)], check=True, capture_output=True, text=True, env=env,
                   timeout=240)
    script = (
        "import fairvault, sys\n"
        "assert fairvault.__file__.startswith(sys.argv[1]), fairvault.__file__\n"
        "with fairvault.Vault(sys.argv[2], key=sys.argv[3]) as v:\n"
        "    print(sorted(v.list_datasets().name))\n")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", script, str(venv),
                          vault_server.target, vault_server.regulator_key], check=True,
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert "'pop'" in out.stdout
