"""Generate the ``apache.rocketmq.v2`` protocol modules at build time.

rmq does not keep a copy of Apache's ``service.proto`` / ``definition.proto``.
The schema comes from the maintained package Apache publishes for its Python
SDK (PyPI ``rocketmq-python-client``, pinned below with its sha256): its
``*_pb2.py`` modules carry each ``.proto`` file as a serialized
``FileDescriptorProto``.  This module

1. fetches that wheel with pip (``pip download --no-deps``, cached under
   ``build/``) -- never installing it: its top-level package ``rocketmq`` would
   clash with the C++ client wrapper ``rocketmq==0.4.4`` the interop tests use;
2. reads the descriptors out of the wheel's source text with ``ast`` (nothing
   of the wheel is imported or run);
3. renames the files into this package (``rmq/proxy/v2/definition.proto``, ...)
   so the generated imports point here, and
4. runs ``grpc_tools.protoc`` with ``--descriptor_set_in`` to write
   ``rmq/proxy/v2/{definition,service}_pb2.py`` and ``service_pb2_grpc.py``.

The generated modules are build products (git-ignored), like the Cython
extensions.  ``python -m rmq.proxy.codegen`` (``make proto``) re-generates
them when missing; ``--wheel FILE`` uses an already downloaded wheel.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile

CLIENT_PACKAGE = "rocketmq-python-client"
CLIENT_VERSION = "5.1.2"
WHEEL_NAME = "rocketmq_python_client-5.1.2-py3-none-any.whl"
WHEEL_SHA256 = "b527020694cb6a91bb490b158a63c0b34e4b46b790dde2d435e4c5ba54a621f6"
# the wheel's modules holding the files rmq serves, in dependency order
SOURCES = (("rocketmq/grpc_protocol/definition_pb2.py", "definition.proto"),
           ("rocketmq/grpc_protocol/service_pb2.py", "service.proto"))
PACKAGE_DIR = os.path.join("rmq", "proxy", "v2")
OUTPUTS = ("definition_pb2.py", "service_pb2.py", "service_pb2_grpc.py")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class CodegenError(Exception):
    """The protocol modules cannot be generated (one line for the user)."""


def generated(root: str = _ROOT) -> bool:
    """True when every generated module is present."""
    return all(os.path.exists(os.path.join(root, PACKAGE_DIR, n)) for n in OUTPUTS)


def fetch_wheel(cache_dir: str) -> str:
    """The pinned client wheel, downloaded by pip once into ``cache_dir``."""
    path = os.path.join(cache_dir, WHEEL_NAME)
    if not os.path.exists(path):
        os.makedirs(cache_dir, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
               "-d", cache_dir, f"{CLIENT_PACKAGE}=={CLIENT_VERSION}"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0 or not os.path.exists(path):
            raise CodegenError(f"pip download {CLIENT_PACKAGE}=={CLIENT_VERSION} failed: "
                               f"{done.stderr.strip().splitlines()[-1:] or done.returncode}")
    check_digest(path)
    return path


def check_digest(path: str) -> None:
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != WHEEL_SHA256:
        raise CodegenError(f"{path}: sha256 {digest} is not the pinned {WHEEL_SHA256}")


def serialized_file(source: str) -> bytes:
    """The bytes passed to ``AddSerializedFile(...)`` in a generated ``_pb2`` module."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "AddSerializedFile":
            if node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, bytes):
                return node.args[0].value
    raise CodegenError("no serialized descriptor in the module")


def descriptor_set(wheel: str) -> bytes:
    """A FileDescriptorSet of the wheel's files, renamed into ``rmq/proxy/v2/``,
    with the well-known types they import."""
    from google.protobuf import descriptor_pb2, duration_pb2, timestamp_pb2

    out = descriptor_pb2.FileDescriptorSet()
    for module in (duration_pb2, timestamp_pb2):
        module.DESCRIPTOR.CopyToProto(out.file.add())
    renames = {name: f"{PACKAGE_DIR}/{name}".replace(os.sep, "/") for _, name in SOURCES}
    with zipfile.ZipFile(wheel) as zf:
        for member, name in SOURCES:
            proto = descriptor_pb2.FileDescriptorProto.FromString(
                serialized_file(zf.read(member).decode("utf-8")))
            if proto.name != name:
                raise CodegenError(f"{member} describes {proto.name}, not {name}")
            proto.name = renames[name]
            deps = [renames.get(d, d) for d in proto.dependency]
            del proto.dependency[:]
            proto.dependency.extend(deps)
            out.file.append(proto)
    return out.SerializeToString()


def generate(root: str = _ROOT, wheel: str | None = None) -> list[str]:
    """Write the modules under ``root``; returns their paths."""
    from grpc_tools import protoc

    wheel = wheel or fetch_wheel(os.path.join(root, "build", "rmq5-client"))
    check_digest(wheel)
    data = descriptor_set(wheel)
    with tempfile.TemporaryDirectory() as tmp:
        desc = os.path.join(tmp, "apache_rocketmq_v2.desc")
        with open(desc, "wb") as f:
            f.write(data)
        names = [f"{PACKAGE_DIR}/{name}".replace(os.sep, "/") for _, name in SOURCES]
        args = ["protoc", f"--descriptor_set_in={desc}", f"--python_out={tmp}",
                f"--pyi_out={tmp}", f"--grpc_python_out={tmp}", *names]
        if protoc.main(args) != 0:
            raise CodegenError("grpc_tools.protoc failed")
        target = os.path.join(root, PACKAGE_DIR)
        os.makedirs(target, exist_ok=True)
        written = []
        for name in sorted(os.listdir(os.path.join(tmp, PACKAGE_DIR))):
            src = os.path.join(tmp, PACKAGE_DIR, name)
            dst = os.path.join(target, name)
            os.replace(src, dst)
            written.append(dst)
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rmq.proxy.codegen",
                                description="Generate rmq/proxy/v2 (apache.rocketmq.v2 messages "
                                            "and the MessagingService stubs)")
    p.add_argument("--wheel", help=f"a downloaded {WHEEL_NAME} (default: pip download it)")
    p.add_argument("--if-missing", action="store_true", help="do nothing when already generated")
    args = p.parse_args(argv)
    if args.if_missing and generated():
        return 0
    try:
        for path in generate(wheel=args.wheel):
            print(os.path.relpath(path, _ROOT))
    except CodegenError as exc:
        print(f"rmq.proxy.codegen: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
