"""The Jenkinsfile parses as Groovy (the real compiler) and calls only Make targets that exist."""
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JENKINSFILE = os.path.join(ROOT, "deploy", "Jenkinsfile")


def read():
    with open(JENKINSFILE) as fh:
        return fh.read()


def groovy_parse(path):
    # The Make target fetches org.apache.groovy:groovy into .local/ once, then parses with it.
    return subprocess.run(["make", "-s", "check-jenkinsfile", f"JENKINSFILE={path}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_jenkinsfile_is_valid_groovy():
    proc = groovy_parse(JENKINSFILE)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_groovy_check_rejects_a_jenkinsfile_with_a_syntax_error(tmp_path):
    broken = tmp_path / "Jenkinsfile"
    broken.write_text(read().replace("stage('verify canary') {", "stage('verify canary') ", 1))
    proc = groovy_parse(str(broken))
    assert proc.returncode != 0
    assert "MultipleCompilationErrorsException" in proc.stderr


def sh_steps():
    return re.findall(r"\bsh\s+'([^']*)'", read())


def test_every_stage_only_calls_make_or_a_deploy_script():
    steps = sh_steps()
    assert len(steps) >= 6
    assert all(s.startswith("make ") or s.startswith("deploy/") for s in steps), steps


def test_every_make_target_the_jenkinsfile_calls_exists():
    targets = [s.split()[1] for s in sh_steps() if s.startswith("make ")]
    assert {"build", "test", "deploy-canary", "verify-canary", "deploy-stage",
            "deploy-main"} <= set(targets)
    for target in targets:
        proc = subprocess.run(["make", "-n", target, "VERSION=v1"], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, f"make -n {target}: {proc.stderr}"


def test_canary_is_verified_before_stage_and_main_needs_an_approval():
    names = re.findall(r"stage\('([^']+)'\)", read())
    assert names == ["build", "test", "deploy canary", "verify canary", "deploy stage",
                     "approve main", "deploy main"]
    approve = read().split("stage('approve main')")[1].split("stage('deploy main')")[0]
    assert re.search(r"\binput\s+message:", approve)
    canary = read().split("stage('deploy canary')")[1].split("stage('verify canary')")[0]
    assert "when { branch 'main' }" in canary
