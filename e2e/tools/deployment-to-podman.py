#!/usr/bin/env python3
"""Turn a rendered chart (a stream of JSON objects from
`kubectl create --dry-run=client -o json`) into a `podman run` of its
Deployment's first container, as a kubelet would start it:

  * the container's image, args and env (fieldRef metadata.name and
    metadata.namespace become POD_NAME-like values given on the command
    line; other valueFrom sources are refused);
  * the pod and container security contexts: runAsUser/runAsGroup ->
    --user, readOnlyRootFilesystem -> --read-only (no tmpfs podman would
    add by itself), capabilities.drop ALL -> --cap-drop=ALL,
    allowPrivilegeEscalation false -> no-new-privileges, seccomp
    RuntimeDefault -> podman's default profile;
  * every volumeMount: a projected or configMap volume is written out of
    the rendered ConfigMaps into DIR/volumes/NAME and bind-mounted
    read-only; an emptyDir is a directory made as the kubelet makes one
    (mode 0777, fsGroup's with the setgid bit), bind-mounted;
  * the service account: DIR/serviceaccount (token, ca.crt, namespace,
    written by the caller) at /var/run/secrets/kubernetes.io/serviceaccount
    when automountServiceAccountToken is not false, and
    KUBERNETES_SERVICE_HOST/PORT from --apiserver HOST:PORT.

Usage: deployment-to-podman.py DIR POD_NAME HOST:PORT < rendered.json
Prints the podman run arguments (after `podman run`), one per line, with
the image and the container args last. Exits 1 naming anything of the pod
spec it cannot carry over, so the run never differs silently from the
Deployment."""
import json
import os
import sys


def fail(msg):
    sys.stderr.write("deployment-to-podman: %s\n" % msg)
    sys.exit(1)


def objects(text):
    dec = json.JSONDecoder()
    i, out = 0, []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        o, i = dec.raw_decode(text, i)
        out.extend(o.get("items", []) if o.get("kind") == "List" else [o])


def write_configmap(cms, name, items, into):
    cm = cms.get(name)
    if cm is None:
        fail("the rendering has no ConfigMap %s" % name)
    data = cm.get("data", {})
    pairs = [(i["key"], i["path"]) for i in items] if items else [(k, k) for k in data]
    for key, path in pairs:
        if key not in data:
            fail("ConfigMap %s has no key %s" % (name, key))
        dest = os.path.join(into, path)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "w") as f:
            f.write(data[key])
        os.chmod(dest, 0o644)


def volume_args(vol, mount, cms, fs_group, workdir):
    name, target = vol["name"], mount["mountPath"]
    if mount.get("subPath"):
        fail("volumeMount %s: subPath is not carried over" % name)
    if "emptyDir" in vol:
        # What the kubelet does: a directory of its own, mode 0777, given
        # to fsGroup with the setgid bit, bind-mounted. (A podman --tmpfs
        # is not the same: runc gives the tmpfs the mode of the image's
        # directory beneath it, and root owns it.)
        d = os.path.join(workdir, "volumes", name)
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o777)
        if fs_group is not None:
            os.chown(d, -1, fs_group)
            os.chmod(d, 0o2777)
        return ["-v", "%s:%s" % (d, target)]
    d = os.path.join(workdir, "volumes", name)
    os.makedirs(d, exist_ok=True)
    if "projected" in vol:
        for src in vol["projected"]["sources"]:
            if "configMap" not in src:
                fail("volume %s: only configMap sources are carried over" % name)
            write_configmap(cms, src["configMap"]["name"], src["configMap"].get("items"), d)
    elif "configMap" in vol:
        write_configmap(cms, vol["configMap"]["name"], vol["configMap"].get("items"), d)
    else:
        fail("volume %s: kind %s is not carried over" % (name, [k for k in vol if k != "name"]))
    for root, dirs, _ in os.walk(d):
        for x in dirs:
            os.chmod(os.path.join(root, x), 0o755)
    os.chmod(d, 0o755)
    # Kubernetes mounts ConfigMap volumes read-only whatever readOnly says.
    return ["-v", "%s:%s:ro" % (d, target)]


def main():
    if len(sys.argv) != 4:
        fail("usage: deployment-to-podman.py DIR POD_NAME HOST:PORT < rendered.json")
    workdir, pod_name, apiserver = sys.argv[1:]
    objs = objects(sys.stdin.read())
    deps = [o for o in objs if o.get("kind") == "Deployment"]
    if len(deps) != 1:
        fail("want exactly one Deployment in the rendering, found %d" % len(deps))
    cms = {o["metadata"]["name"]: o for o in objs if o.get("kind") == "ConfigMap"}
    dep = deps[0]
    ns = dep["metadata"].get("namespace", "default")
    spec = dep["spec"]["template"]["spec"]
    c = spec["containers"][0]
    psc, csc = spec.get("securityContext", {}), c.get("securityContext", {})
    args = ["--name", pod_name, "--network", "host", "--pull", "never"]
    user, group = csc.get("runAsUser", psc.get("runAsUser")), csc.get("runAsGroup", psc.get("runAsGroup"))
    if user is not None:
        args += ["--user", "%d:%d" % (user, group if group is not None else user)]
    if psc.get("fsGroup") is not None:
        args += ["--group-add", str(psc["fsGroup"])]
    if csc.get("readOnlyRootFilesystem"):
        args += ["--read-only", "--read-only-tmpfs=false"]
    if "ALL" in csc.get("capabilities", {}).get("drop", []):
        args += ["--cap-drop=ALL"]
    for cap in csc.get("capabilities", {}).get("add", []):
        args += ["--cap-add", cap]
    if csc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    if csc.get("privileged"):
        fail("a privileged container is not carried over")
    for e in c.get("env", []):
        if "value" in e:
            args += ["-e", "%s=%s" % (e["name"], e["value"])]
            continue
        path = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        val = {"metadata.name": pod_name, "metadata.namespace": ns}.get(path)
        if val is None:
            fail("env %s: valueFrom %s is not carried over" % (e["name"], e.get("valueFrom")))
        args += ["-e", "%s=%s" % (e["name"], val)]
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    for m in c.get("volumeMounts", []):
        if m["name"] not in vols:
            fail("volumeMount %s has no volume" % m["name"])
        args += volume_args(vols[m["name"]], m, cms, psc.get("fsGroup"), workdir)
    if spec.get("automountServiceAccountToken", True):
        host, _, port = apiserver.rpartition(":")
        args += ["-v", "%s:/var/run/secrets/kubernetes.io/serviceaccount:ro" % os.path.join(workdir, "serviceaccount"),
                 "-e", "KUBERNETES_SERVICE_HOST=%s" % host, "-e", "KUBERNETES_SERVICE_PORT=%s" % port]
    if c.get("command"):
        args += ["--entrypoint", json.dumps(c["command"])]
    args.append(c["image"])
    args += c.get("args", [])
    sys.stdout.write("".join(a + "\n" for a in args))


main()
