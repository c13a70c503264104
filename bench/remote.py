#!/usr/bin/env python3
"""ckpt push / clone against restic backup / restore, both talking S3 to the
same moto server on 127.0.0.1 (BENCHMARKS.md, "Remotes").

Run with the moto venv's Python (it has boto3):
  target/moto-venv/bin/python bench/remote.py [--corpus /work/corpus] [--ckpt PATH]

Measures, in one run, three tools side by side: ckpt on a plain remote,
ckpt on an encrypted remote (`remote add --encrypt`, passphrase in
CKPT_REMOTE_PASSPHRASE), and restic (which encrypts by default): first
push / `restic backup`, push after a 1-file edit / a second backup, clone /
`restic restore`, the bytes each stored, and ckpt's request counts (its
--json summary). Each run starts a fresh moto server and a fresh copy of
the corpus; every step is taken by all three before the next, in an order
that rotates from run to run. Prints every run, the load average before
it, medians and per-run ratios (encrypted / plain, restic / encrypted); no
run directory is deleted before the last run ends.

`--counts` measures bytes and requests only (no restic, no timing, one
run): the first push, a second workspace holding the same files copied
anew (`cp -R`: same content and modes, new mtimes, as a second `npm
install` gives) pushed to the same bucket, and a 1-file edit pushed.
"""
import argparse, json, os, shutil, socket, statistics, subprocess, sys, tempfile, time

import boto3

ap = argparse.ArgumentParser()
ap.add_argument("--corpus", default="/work/corpus")
ap.add_argument("--ckpt", default=None)
ap.add_argument("--work", default=None, help="scratch directory (default: a temp dir)")
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--counts", action="store_true", help="bytes and requests only (see above)")
args = ap.parse_args()

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ckpt = args.ckpt or os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target")),
                                 "x86_64-unknown-linux-gnu/release/ckpt")
venv = os.path.dirname(sys.executable)
moto_bin = os.path.join(venv, "moto_server")


def start_moto():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    moto = subprocess.Popen([moto_bin, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close(); break
        except OSError:
            time.sleep(0.05)
    endpoint = f"http://127.0.0.1:{port}"
    env = dict(os.environ, AWS_ENDPOINT=endpoint, AWS_ACCESS_KEY_ID="testing",
               AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1", AWS_ALLOW_HTTP="true",
               RESTIC_PASSWORD="bench", AWS_DEFAULT_REGION="us-east-1")
    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    s3.create_bucket(Bucket="bench")
    return moto, endpoint, env, s3


def push_json(ws, name, env):
    r = subprocess.run([ckpt, "push", "s3://bench/ckpt", "--workspace", name, "--json"], cwd=ws,
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"push failed:\n{r.stdout}\n{r.stderr}")
    j = json.loads(r.stdout)
    return {k: j[k] for k in ("bytes_sent", "requests", "objects", "packs", "raw_bytes")}


def edit_one_file(ws, env):
    """The 1-file edit: a line appended to the first file below app/ in
    sorted order, then saved."""
    edit = None
    for dp, dn, fn in sorted(os.walk(os.path.join(ws, "app"))):
        if fn:
            edit = os.path.join(dp, sorted(fn)[0]); break
    with open(edit, "a") as f:
        f.write("\n// edited\n")
    subprocess.run([ckpt, "save", "-m", "edit"], cwd=ws, env=env, check=True, capture_output=True)


def counts(work):
    moto, endpoint, env, s3 = start_moto()
    res = {}
    for name, cp in (("first", ["cp", "-a"]), ("second", ["cp", "-R"])):
        ws = os.path.join(work, name)
        subprocess.run(cp + [args.corpus, ws], check=True)
        subprocess.run([ckpt, "init", ws, "--store", os.path.join(work, name + "-store")], env=env,
                       check=True, capture_output=True)
        subprocess.run([ckpt, "save", "-m", "base"], cwd=ws, env=env, check=True, capture_output=True)
        res[name] = push_json(ws, name, env)
    res["second_over_first_bytes"] = res["second"]["bytes_sent"] / res["first"]["bytes_sent"]
    ws = os.path.join(work, "first")
    edit_one_file(ws, env)
    res["edit"] = push_json(ws, "first", env)
    moto.kill(); moto.wait()
    return res


TOOLS = ("plain", "encrypted", "restic")


def run_once(work, turn):
    """One run: the three tools through first push, 1-file-edit push and
    clone, each step taken by all three before the next, in an order that
    rotates with `turn` (what goes later in a step meets a busier disk)."""
    moto, endpoint, env, s3 = start_moto()
    env["CKPT_REMOTE_PASSPHRASE"] = "bench"

    def stored(prefix):
        n = size = 0
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix=prefix):
            for o in page.get("Contents", []):
                n += 1; size += o["Size"]
        return n, size

    def timed(cmd, cwd=None):
        t = time.perf_counter()
        r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
        dt = time.perf_counter() - t
        if r.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}")
        return dt, r.stdout

    ws = os.path.join(work, "ws")
    subprocess.run(["cp", "-a", args.corpus, ws], check=True)
    subprocess.run([ckpt, "init", ws, "--store", os.path.join(work, "store")], env=env, check=True,
                   capture_output=True)
    subprocess.run([ckpt, "save", "-m", "base"], cwd=ws, env=env, check=True, capture_output=True)
    urls = {"plain": "s3://bench/plain", "encrypted": "s3://bench/encrypted"}
    # The encrypted remote's key configuration (Argon2id once per remote).
    subprocess.run([ckpt, "remote", "add", "--encrypt", "enc", urls["encrypted"]], cwd=ws, env=env,
                   check=True, capture_output=True)
    restic_repo = f"s3:{endpoint}/bench/restic"
    timed(["restic", "-r", restic_repo, "init"])
    res = {"load": os.getloadavg()[0], "order": []}
    order = TOOLS[turn % 3:] + TOOLS[:turn % 3]
    res["order"] = order

    def push(tool, step):
        if tool == "restic":
            dt, _ = timed(["restic", "-r", restic_repo, "backup", "-q", "."], cwd=ws)
            res[f"{tool}_{step}"] = dict(s=dt)
            return
        target = "enc" if tool == "encrypted" else urls["plain"]
        dt, out = timed([ckpt, "push", target, "--workspace", "corpus", "--json"], cwd=ws)
        j = json.loads(out)
        res[f"{tool}_{step}"] = dict(s=dt, requests=j["requests"], sent=j["bytes_sent"])

    def clone(tool):
        # Each clone creates 36k files; all settle after a `sync` first.
        subprocess.run(["sync"]); time.sleep(2)
        dest = os.path.join(work, "clone-" + tool)
        if tool == "restic":
            dt, _ = timed(["restic", "-r", restic_repo, "restore", "latest", "--target", dest, "-q"])
            res[f"{tool}_clone"] = dict(s=dt)
            return
        dt, out = timed([ckpt, "clone", urls[tool], dest, "--workspace", "corpus", "--store",
                         dest + "-store", "--json"], cwd=work)
        j = json.loads(out)
        res[f"{tool}_clone"] = dict(s=dt, requests=j["requests"], received=j["bytes_received"])

    for tool in order:
        push(tool, "first")
    edit_one_file(ws, env)
    for tool in order:
        push(tool, "edit")
    for tool in order:
        clone(tool)
    for tool in TOOLS:
        res[f"{tool}_stored"] = dict(zip(("objects", "bytes"), stored(tool + "/")))
    for step in ("first", "edit", "clone"):
        res[f"encrypted_over_plain_{step}"] = res[f"encrypted_{step}"]["s"] / res[f"plain_{step}"]["s"]
        res[f"restic_over_encrypted_{step}"] = res[f"restic_{step}"]["s"] / res[f"encrypted_{step}"]["s"]
    moto.kill(); moto.wait()
    return res


base = args.work or tempfile.mkdtemp(prefix="ckpt-remote-bench-")
if args.counts:
    work = os.path.join(base, "counts")
    os.makedirs(work, exist_ok=True)
    print(json.dumps(counts(work), indent=1))
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(0)
runs = []
for i in range(args.runs):
    work = os.path.join(base, f"run{i}")
    os.makedirs(work, exist_ok=True)
    r = run_once(work, i)
    print(json.dumps(r), flush=True)
    runs.append(r)
# Deleted only now: a run right after a large deletion meets ext4's
# slow-create trap (BENCHMARKS.md), which would weigh on whichever clone
# creates more inodes. About 4 GB of disk per run.
for i in range(args.runs):
    shutil.rmtree(os.path.join(base, f"run{i}"), ignore_errors=True)
med = lambda f: statistics.median(f(r) for r in runs)
summary = {"runs": len(runs), "load_before_runs": [round(r["load"], 2) for r in runs]}
for step in ("first", "edit", "clone"):
    for tool in TOOLS:
        summary[f"{tool}_{step}_s"] = med(lambda r: r[f"{tool}_{step}"]["s"])
    summary[f"encrypted_over_plain_{step}"] = med(lambda r: r[f"encrypted_over_plain_{step}"])
    summary[f"restic_over_encrypted_{step}"] = med(lambda r: r[f"restic_over_encrypted_{step}"])
summary["encrypted_requests"] = {s: med(lambda r: r[f"encrypted_{s}"]["requests"]) for s in ("first", "edit", "clone")}
summary["encrypted_edit_bytes_sent"] = med(lambda r: r["encrypted_edit"]["sent"])
summary["stored"] = {t: runs[-1][f"{t}_stored"] for t in TOOLS}
print(json.dumps(summary, indent=1))
