#!/usr/bin/env python3
"""ckpt push / clone against restic backup / restore, both talking S3 to the
same moto server on 127.0.0.1 (BENCHMARKS.md, "Remotes").

Run with the moto venv's Python (it has boto3):
  target/moto-venv/bin/python bench/remote.py [--corpus /work/corpus] [--ckpt PATH]

Measures, in one run: first push vs `restic backup`, push after a 1-file
edit vs a second `restic backup`, clone vs `restic restore`, bytes stored in
the bucket by each, and ckpt's request counts (its --json summary).
Each run starts a fresh moto server and a fresh copy of the corpus; prints
every run, the load average before it, medians and per-run ratios. Clone
and restore alternate which goes first from run to run; no run directory
is deleted before the last run ends.

`--encrypt` runs ckpt against an encrypted remote (`remote add --encrypt`,
passphrase in CKPT_REMOTE_PASSPHRASE; restic encrypts by default).

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
ap.add_argument("--encrypt", action="store_true", help="ckpt on an encrypted remote (see above)")
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
    if args.encrypt:
        env["CKPT_REMOTE_PASSPHRASE"] = "bench"
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


def run_once(work, restic_first=False):
    moto, endpoint, env, s3 = start_moto()

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
    res = {"load": os.getloadavg()[0], "encrypt": args.encrypt}
    url = "s3://bench/ckpt"
    if args.encrypt:
        # Creates the remote's encryption config (Argon2id once, then cached).
        subprocess.run([ckpt, "remote", "add", "--encrypt", "origin", url], cwd=ws, env=env,
                       check=True, capture_output=True)
    dt, out = timed([ckpt, "push", url, "--workspace", "corpus", "--json"], cwd=ws)
    j = json.loads(out); res["ckpt_first_push"] = dict(s=dt, requests=j["requests"], sent=j["bytes_sent"], objects=j["objects"], packs=j["packs"])
    repo = f"s3:{endpoint}/bench/restic"
    timed(["restic", "-r", repo, "init"])
    dt, _ = timed(["restic", "-r", repo, "backup", "-q", "."], cwd=ws)
    res["restic_first_backup"] = dict(s=dt)
    edit_one_file(ws, env)
    dt, out = timed([ckpt, "push", url, "--workspace", "corpus", "--json"], cwd=ws)
    j = json.loads(out); res["ckpt_edit_push"] = dict(s=dt, requests=j["requests"], sent=j["bytes_sent"], objects=j["objects"], packs=j["packs"])
    dt, _ = timed(["restic", "-r", repo, "backup", "-q", "."], cwd=ws)
    res["restic_edit_backup"] = dict(s=dt)
    # Clone / restore, each creating 36k files: which goes first alternates
    # between runs (files created later in a run meet a busier disk), and
    # both settle after a `sync` first.
    def clone():
        subprocess.run(["sync"]); time.sleep(2)
        dest = os.path.join(work, "clone")
        dt, out = timed([ckpt, "clone", url, dest, "--workspace", "corpus", "--store", os.path.join(work, "clone-store"), "--json"], cwd=work)
        j = json.loads(out); res["ckpt_clone"] = dict(s=dt, requests=j["requests"], received=j["bytes_received"], files=j["files"])

    def restore():
        subprocess.run(["sync"]); time.sleep(2)
        dt, _ = timed(["restic", "-r", repo, "restore", "latest", "--target", os.path.join(work, "restore"), "-q"])
        res["restic_restore"] = dict(s=dt)

    for step in ((restore, clone) if restic_first else (clone, restore)):
        step()
    res["clone_first"] = not restic_first
    res["ckpt_stored"] = dict(zip(("objects", "bytes"), stored("ckpt/")))
    res["restic_stored"] = dict(zip(("objects", "bytes"), stored("restic/")))
    res["ratio_first"] = res["restic_first_backup"]["s"] / res["ckpt_first_push"]["s"]
    res["ratio_edit"] = res["restic_edit_backup"]["s"] / res["ckpt_edit_push"]["s"]
    res["ratio_clone"] = res["restic_restore"]["s"] / res["ckpt_clone"]["s"]
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
    r = run_once(work, restic_first=i % 2 == 1)
    print(json.dumps(r), flush=True)
    runs.append(r)
# Deleted only now: a run right after a large deletion meets ext4's
# slow-create trap (BENCHMARKS.md), which would weigh on whichever of clone
# and restore creates more inodes. About 2.5 GB of disk per run.
for i in range(args.runs):
    shutil.rmtree(os.path.join(base, f"run{i}"), ignore_errors=True)
med = lambda f: statistics.median(f(r) for r in runs)
summary = {
    "runs": len(runs),
    "load_before_runs": [round(r["load"], 2) for r in runs],
    "ckpt_first_push_s": med(lambda r: r["ckpt_first_push"]["s"]),
    "restic_first_backup_s": med(lambda r: r["restic_first_backup"]["s"]),
    "ckpt_edit_push_s": med(lambda r: r["ckpt_edit_push"]["s"]),
    "restic_edit_backup_s": med(lambda r: r["restic_edit_backup"]["s"]),
    "ckpt_clone_s": med(lambda r: r["ckpt_clone"]["s"]),
    "restic_restore_s": med(lambda r: r["restic_restore"]["s"]),
    "ratio_first_restic_over_ckpt": med(lambda r: r["ratio_first"]),
    "ratio_edit_restic_over_ckpt": med(lambda r: r["ratio_edit"]),
    "ratio_clone_restic_over_ckpt": med(lambda r: r["ratio_clone"]),
    "ckpt_requests": {k: med(lambda r: r[k]["requests"]) for k in ("ckpt_first_push", "ckpt_edit_push", "ckpt_clone")},
    "ckpt_edit_push_bytes_sent": med(lambda r: r["ckpt_edit_push"]["sent"]),
    "ckpt_stored": runs[-1]["ckpt_stored"],
    "restic_stored": runs[-1]["restic_stored"],
}
print(json.dumps(summary, indent=1))
