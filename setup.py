"""Package layout: the repository keeps plugins/ and pipelines/ beside kfmt/, but they install
inside the kfmt namespace (kfmt.default_plugins, kfmt.pipelines): no top-level "plugins" or
"pipelines" package may land in site-packages. Everything else lives in pyproject.toml.

One optional C extension, kfmt._speedups (kfmt/csrc/, docs/performance.md): built when a C compiler
is there, skipped with a warning when it is not (or when KFMT_NO_EXTENSIONS=1), as aiokafka and
msgpack do; kfmt then runs its pure-Python reference code, with identical results."""
import os
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

MAPPED = {"kfmt.default_plugins": "plugins", "kfmt.pipelines": "pipelines"}


def packages_under(prefix: str, directory: str) -> list[str]:
    return [prefix] + [f"{prefix}.{name}" for name in find_packages(directory)]


packages = find_packages(include=["kfmt", "kfmt.*"])
for prefix, directory in MAPPED.items():
    packages += packages_under(prefix, directory)

CSRC = "kfmt/csrc"
speedups = Extension(
    "kfmt._speedups",
    sources=[f"{CSRC}/{name}.c" for name in
             ("module", "common", "crc", "xxh3", "md5", "arrow", "records_v2", "digest", "frames", "legacy",
              "verify", "facts", "compressed", "entries", "dump_text", "json_lines", "avro")],
    depends=[f"{CSRC}/{name}.h" for name in ("native", "layout", "frames", "records_v2", "xxh3", "md5")],
    extra_compile_args=[] if sys.platform == "win32" else ["-O3", "-std=gnu11"],
)


class OptionalBuildExt(build_ext):
    """build_ext that never fails the install: without a working compiler, no extension."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # no compiler at all (PlatformError and friends)
            self._skip(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # a compiler error: missing headers, an unsupported compiler
            self._skip(exc)

    @staticmethod
    def _skip(exc):
        sys.stderr.write(f"warning: kfmt's C extension was not built ({exc}); kfmt will run its "
                         "pure-Python code (same results, slower)\n")


build_native = os.environ.get("KFMT_NO_EXTENSIONS", "") in ("", "0")
setup(packages=packages, package_dir={"kfmt": "kfmt", **MAPPED},
      ext_modules=[speedups] if build_native else [],
      cmdclass={"build_ext": OptionalBuildExt},
      # the C sources travel in the sdist (MANIFEST.in), not in the installed package
      include_package_data=False)
