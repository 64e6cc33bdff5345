#!/usr/bin/python3
"""The main job on real data, end to end: the resnet18_exits sample on the model that
train_digits.py trained (the CTest fixture digits_training), checked from what it prints and
the JSON it writes.

    check_digits_sample.py SAMPLE CACHE WORK [SWEEP]

SAMPLE: the resnet18_exits binary; CACHE: train_digits.py's --cache folder; WORK: a scratch
folder; SWEEP: the thresholds of the sweep (default the sample's, 0.5,0.7,0.8,0.9,0.95,0.99;
the sanitizer build passes fewer: every threshold is 397 more inferences). Asserts accuracy (overall and per answering exit), that exits fire, agreement with
PyTorch's answers (>= 99.5%, decisions differing only at the threshold), the JSON's fields, the
SVG, and that a damaged held-out folder or bad flags are refused with a named reason.
Exit 77 (skipped) when train_digits.py cannot run (no Debian torch).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..", "..", "samples", "resnet18_exits", "train_digits.py")
HEADS = ["exit0", "exit1", "exit2", "final"]


def run(command, timeout=600):
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def check(condition, message):
    if not condition:
        print(f"check_digits_sample.py: FAILED: {message}", file=sys.stderr)
        sys.exit(1)


def main():
    sample, cache, work = sys.argv[1:4]
    sweep = [float(t) for t in (sys.argv[4] if len(sys.argv) > 4 else "0.5,0.7,0.8,0.9,0.95,0.99").split(",")]
    where = run(["/usr/bin/python3", TRAIN, "--cache", cache, "--where"])
    if where.returncode == 77:
        print(where.stderr.strip())
        sys.exit(77)
    check(where.returncode == 0, f"train_digits.py --where: {where.stderr}")
    folder = where.stdout.strip()
    check(os.path.isfile(os.path.join(folder, "manifest.json")),
          f"{folder}: not trained (the digits_training fixture runs first)")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    report, plot = os.path.join(work, "digits.json"), os.path.join(work, "tradeoff.svg")

    result = run([sample, "--heldout", folder, "--device", "cpu", "--export-json", report,
                  "--plot", plot, "--sweep", ",".join(str(t) for t in sweep)])
    print(result.stdout)
    check(result.returncode == 0, f"sample exit {result.returncode}: {result.stderr}")
    out = result.stdout

    # What it prints: the accuracy of the early policy and the agreement lines.
    overall = re.search(r"^  all images +(\d+) +([\d.]+)%$", out, re.M)
    check(overall is not None, "no overall accuracy line")
    check(int(overall.group(1)) == 397 and float(overall.group(2)) >= 95.0,
          f"early accuracy {overall.group(2)}% on {overall.group(1)} images (needs 397, >= 95%)")
    agreement = re.findall(r"^  (\S+(?: [\d.]+)?) +(\d+)/(\d+) images agree .*  (ok|FAILED)$", out, re.M)
    check(len(agreement) == 3 + len(sweep),
          f"expected {3 + len(sweep)} agreement lines (off, all, early, the sweep), got {agreement}")
    for label, agree, total, verdict in agreement:
        check(verdict == "ok" and int(agree) >= 0.995 * int(total),
              f"{label}: {agree}/{total} agree with PyTorch, {verdict}")

    # The JSON: the fields the issue names, and numbers that hang together.
    with open(report) as f:
        j = json.load(f)
    check(j["images"] == 397 and j["device"] == "cpu" and "digits" in j["dataset"], f"header {j}")
    check(j["agrees_with_torch"] is True, "agrees_with_torch is not true")
    for policy in ("off", "all", "early"):
        p = j["policies"][policy]
        check(sum(p["answered"].values()) == 397, f"{policy}: answered {p['answered']}")
        check(p["accuracy"] >= 0.95, f"{policy}: accuracy {p['accuracy']}")
        check(0 < p["median_latency_ms"] and 0 < p["mean_latency_ms"], f"{policy}: latency {p}")
    check(j["policies"]["off"]["answered"] == {"exit0": 0, "exit1": 0, "exit2": 0, "final": 397},
          "off must answer everything at final")
    early = j["policies"]["early"]["answered"]
    check(early["exit0"] + early["exit1"] + early["exit2"] > 397 // 2,
          f"at threshold 0.9 the exits answer only {early} (the trained heads should)")
    for head in HEADS:
        facts = j["policies"]["all"]["heads"][head]
        check(facts["accuracy"] >= 0.9 and facts["top1_agreement_with_torch"] >= 0.995,
              f"head {head}: {facts}")
        if head != "final":
            check(facts["max_confidence_difference"] < 1e-4, f"head {head}: {facts}")
    thresholds = [p["threshold"] for p in j["sweep"]]
    check(thresholds == sweep, f"sweep thresholds {thresholds}, expected {sweep}")
    finals = [p["answered"]["final"] for p in j["sweep"]]
    check(finals == sorted(finals), f"a higher threshold must leave at least as much to final: {finals}")
    check(os.path.isfile(j["weights"]) and os.path.isfile(j["heldout"]["images"]) and
          os.path.isfile(j["heldout"]["labels"]), f"paths {j['weights']}, {j['heldout']}")

    # The picture: well-formed SVG with a point per threshold and a bar row per threshold.
    svg = ET.parse(plot).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    circles = [c for c in svg.iter(ns + "circle") if c.find(ns + "title") is not None]
    check(len(circles) == len(sweep), f"{plot}: {len(circles)} threshold points, expected {len(sweep)}")
    texts = [t.text for t in svg.iter(ns + "text")]
    for label in ("T = 0.5", "T = 0.99"):
        check(label in texts, f"{plot}: no label '{label}'")
    # off and all: a mark each (told apart by the legend), its hover title naming the policy.
    titles = [t.text or "" for t in svg.iter(ns + "title")]
    for policy in ("off", "all"):
        check(sum(1 for t in titles if t.startswith(policy + ": ")) == 1,
              f"{plot}: no mark titled '{policy}: ...'")

    # Refusals: bad flags are usage errors (2), a damaged folder a named run error (1), and
    # nothing is written when the output folder does not exist.
    for args, status, reason in [
        (["--heldout", folder, "--size", "64"], 2, "excludes"),
        (["--heldout", folder, "--sweep", "0.5,1.5"], 2, "1.5 is not in [0, 1]"),
        (["--plot", os.path.join(work, "p.svg")], 2, "requires --heldout"),
        (["--heldout", os.path.join(work, "missing")], 1, "not a folder"),
        (["--heldout", folder, "--export-json", os.path.join(work, "no", "r.json")], 1,
         "does not exist"),
    ]:
        r = run([sample, "--device", "cpu"] + args, timeout=120)
        check(r.returncode == status and reason in r.stderr,
              f"{args}: exit {r.returncode}, stderr {r.stderr!r}; expected {status} and '{reason}'")
    damaged = os.path.join(work, "damaged")
    shutil.copytree(folder, damaged)
    import numpy as np  # Debian's python3-numpy, there with torch
    labels = np.load(os.path.join(damaged, "heldout_labels.npy"))
    labels[5] = 12.0
    np.save(os.path.join(damaged, "heldout_labels.npy"), labels)
    r = run([sample, "--device", "cpu", "--heldout", damaged], timeout=120)
    check(r.returncode == 1 and "heldout_labels.npy: element 5 is 12, not a class index" in r.stderr,
          f"damaged labels: exit {r.returncode}, {r.stderr!r}")
    np.save(os.path.join(damaged, "heldout_labels.npy"), labels[:-1])
    r = run([sample, "--device", "cpu", "--heldout", damaged], timeout=120)
    check(r.returncode == 1 and "heldout_labels.npy: has shape 396, expected 397" in r.stderr,
          f"short labels: exit {r.returncode}, {r.stderr!r}")
    print("check_digits_sample.py: ok")


if __name__ == "__main__":
    main()
