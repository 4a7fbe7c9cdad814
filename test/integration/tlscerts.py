"""Throwaway certificates for TLS tests, made with the openssl CLI: a CA,
and certificates it signs (server certificates for 127.0.0.1, client
certificates with a CN). Every openssl run is bounded in time."""

import os
import subprocess


class CertDir:
    """Certificates in directory d: NAME.crt and NAME.key (mode 0600)."""

    def __init__(self, d):
        self.d = d
        os.makedirs(d, exist_ok=True)

    def path(self, name):
        return os.path.join(self.d, name)

    def _openssl(self, *args):
        subprocess.run(["openssl", *args], cwd=self.d, check=True, capture_output=True, timeout=60)

    def ca(self, name):
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                      "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2",
                      "-subj", f"/CN=test-{name}")

    def cert(self, name, cn, ca="ca", ip=None, digest="sha256", curve="prime256v1"):
        """A certificate signed by ca with subject CN=cn (and an IP SAN)."""
        self._openssl("req", "-newkey", "ec", "-pkeyopt", f"ec_paramgen_curve:{curve}", "-nodes",
                      "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}")
        os.chmod(self.path(f"{name}.key"), 0o600)
        extra = []
        if ip:
            with open(self.path(f"{name}.ext"), "w") as f:
                f.write(f"subjectAltName = IP:{ip}\n")
            extra = ["-extfile", f"{name}.ext"]
        self._openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
                      "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", f"-{digest}", *extra)
