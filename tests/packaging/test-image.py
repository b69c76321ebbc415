#!/usr/bin/env python3
"""The container image deploy/build-image writes, read back as a runtime would.

Builds the image from the gitcd under test into a scratch folder, then,
without trusting the builder: the OCI layout's index names the image by its
version, every blob matches its sha256 digest and size, the config's
diff_id is the digest of the uncompressed layer, and the config runs
/usr/bin/gitcd as user 65532. The layer is unpacked into a root file system
and, chrooted into it (as root, nothing from the host visible but that
tree), `gitcd --version` prints the version and `gitcd validate` checks an
example as user 65532: the binary, its libraries and its user are all in
the image, and so are libgit2 and libarchive, which gitcd loads on use, with
their own. Skipped (77) without root (chroot needs it) or ldd.
"""
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    if os.geteuid() != 0:
        print("skipped: chroot needs root")
        sys.exit(77)
    if not shutil.which("ldd"):
        print("skipped: no ldd")
        sys.exit(77)
    src = os.environ["GITCD_SOURCE_ROOT"]
    gitcd = os.environ["GITCD_BIN"]
    version = subprocess.run([gitcd, "--version"], check=True, capture_output=True,
                             text=True).stdout.split()[-1]

    with tempfile.TemporaryDirectory(prefix="gitcd-image.") as tmp:
        layout = os.path.join(tmp, "oci")
        subprocess.run([os.path.join(src, "deploy", "build-image"), "--gitcd", gitcd, layout],
                       check=True)

        def read_blob(desc):
            algo, _, hexd = desc["digest"].partition(":")
            if algo != "sha256":
                fail(f"digest algorithm {algo}")
            data = open(os.path.join(layout, "blobs", "sha256", hexd), "rb").read()
            if hashlib.sha256(data).hexdigest() != hexd:
                fail(f"blob {hexd} does not match its digest")
            if len(data) != desc["size"]:
                fail(f"blob {hexd} is {len(data)} bytes, its descriptor says {desc['size']}")
            return data

        if json.load(open(os.path.join(layout, "oci-layout")))["imageLayoutVersion"] != "1.0.0":
            fail("oci-layout version")
        index = json.load(open(os.path.join(layout, "index.json")))
        refs = [m for m in index["manifests"]
                if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == version]
        if len(refs) != 1:
            fail(f"index.json has no single manifest named {version}: {index}")
        manifest = json.loads(read_blob(refs[0]))
        if manifest["mediaType"] != "application/vnd.oci.image.manifest.v1+json":
            fail("manifest media type")
        config = json.loads(read_blob(manifest["config"]))
        if config["config"]["Entrypoint"] != ["/usr/bin/gitcd"] or config["config"]["User"] != "65532:65532":
            fail(f"image config: {config['config']}")
        if len(manifest["layers"]) != len(config["rootfs"]["diff_ids"]):
            fail("layers and diff_ids differ in number")

        rootfs = os.path.join(tmp, "rootfs")
        os.mkdir(rootfs)
        for desc, diff_id in zip(manifest["layers"], config["rootfs"]["diff_ids"]):
            if desc["mediaType"] != "application/vnd.oci.image.layer.v1.tar+gzip":
                fail(f"layer media type {desc['mediaType']}")
            tar = gzip.decompress(read_blob(desc))
            if "sha256:" + hashlib.sha256(tar).hexdigest() != diff_id:
                fail("diff_id is not the digest of the uncompressed layer")
            layer = os.path.join(tmp, "layer.tar")
            open(layer, "wb").write(tar)
            with tarfile.open(layer) as t:
                for m in t.getmembers():
                    if m.name.startswith("/") or ".." in m.name.split("/"):
                        fail(f"layer entry outside the root: {m.name}")
                t.extractall(rootfs, numeric_owner=True)

        out = subprocess.run(["chroot", rootfs, "/usr/bin/gitcd", "--version"],
                             capture_output=True, text=True)
        if out.returncode != 0 or out.stdout.strip() != f"gitcd {version}":
            fail(f"gitcd --version in the image: exit {out.returncode}, {out.stdout!r} {out.stderr!r}")
        print(out.stdout.strip(), "runs from the image's file system")

        shutil.copy(os.path.join(src, "examples", "quickstart", "etcd.yaml"),
                    os.path.join(rootfs, "tmp", "etcd.yaml"))
        out = subprocess.run(["chroot", "--userspec=65532:65532", rootfs, "/usr/bin/gitcd",
                              "validate", "/tmp/etcd.yaml"], capture_output=True, text=True)
        if out.returncode != 0:
            fail(f"gitcd validate in the image as 65532: exit {out.returncode}: {out.stderr}")
        st = os.stat(os.path.join(rootfs, "var", "lib", "gitcd"))
        if (st.st_uid, st.st_gid) != (65532, 65532):
            fail("/var/lib/gitcd in the image is not owned by 65532")
        print("gitcd validate runs as user 65532 in the image")

        # what gitcd loads on use (util/dload.c: libgit2 for Git sources, libarchive for
        # `gitcd debug bundle`) is in the image, every library it needs with it
        found = {}
        for root, _, files in os.walk(rootfs):
            for name in files:
                found.setdefault(name, os.path.join(root, name)[len(rootfs):])
        loader = next((found[n] for n in found if n.startswith("ld-linux")), None)
        if not loader:
            fail("the image has no dynamic loader")
        for soname in ("libgit2.so.1.5", "libarchive.so.13"):
            if soname not in found:
                fail(f"the image lacks {soname}, which gitcd loads on use")
            out = subprocess.run(["chroot", rootfs, loader, "--list", found[soname]],
                                 capture_output=True, text=True)
            if out.returncode != 0 or "not found" in out.stdout:
                fail(f"{soname} in the image misses libraries: {out.stdout} {out.stderr}")
            print(f"{soname} and what it needs are in the image")


main()
