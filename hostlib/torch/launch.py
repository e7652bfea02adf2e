"""`python -m hostlib.torch.launch [options] TORCHRUN-ARGUMENTS`: torchrun with its own switch and controller.

    python -m hostlib.torch.launch --nproc-per-node 4 examples/train_ddp.py --steps 20

Starts a rootless p4reduce-switch and the controller daemon (as `make demo`
does, logs in logs/torch/), runs torchrun with P4REDUCE_CONTROLLER pointing
at the controller (and a free --master-port unless one is given), stops both
when torchrun ends, and exits with torchrun's status. Everything after the
launcher's own options is torchrun's.

    python -m hostlib.torch.launch --serve

only starts the switch and the controller and prints the P4REDUCE_CONTROLLER
to export for any number of torchrun runs, until Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from hostlib.launch import ROOT, LaunchError, free_port, services
from hostlib.torch.options import ENV_CONTROLLER

_OWN_OPTIONS = ("--switch-ip", "--pool-size", "--logs")
_OWN_FLAGS = ("-h", "--help", "--serve")
_RENDEZVOUS = ("--master-port", "--master_port", "--rdzv-endpoint", "--rdzv_endpoint", "--standalone")


def torchrun_command(arguments: list[str]) -> list[str]:
    """torchrun with `arguments`, on a free master port unless they choose the rendezvous themselves."""
    command = [sys.executable, "-m", "torch.distributed.run"]
    if not any(a.split("=", 1)[0] in _RENDEZVOUS for a in arguments):
        command.append(f"--master-port={free_port()}")
    return command + arguments


def split_arguments(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the launcher's options, torchrun's arguments): the launcher's come first, each with its value."""
    at = 0
    while at < len(argv) and (argv[at] in _OWN_FLAGS or argv[at].split("=", 1)[0] in _OWN_OPTIONS):
        at += 1 if argv[at] in _OWN_FLAGS or "=" in argv[at] else 2
    return argv[:at], argv[at:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hostlib.torch.launch", description=__doc__.splitlines()[0], allow_abbrev=False
    )
    parser.add_argument(
        "--switch-ip", default="127.0.0.1", help="the switch's aggregation address (loopback)"
    )
    parser.add_argument("--pool-size", type=int, default=64, help="slots per job (default 64)")
    parser.add_argument(
        "--logs", type=Path, default=ROOT / "logs" / "torch", help="switch and controller logs"
    )
    parser.add_argument(
        "--serve", action="store_true", help="only run the switch and controller, until Ctrl-C"
    )
    parser.epilog = (
        "then torchrun's arguments and the script's, e.g. --nproc-per-node 4 examples/train_ddp.py"
    )
    own, torchrun = split_arguments(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the switch and controller on the way out
    args = parser.parse_args(own)
    if args.serve == bool(torchrun):
        parser.error("give --serve, or torchrun's arguments: e.g. --nproc-per-node 4 examples/train_ddp.py")
    try:
        with services(args.logs, ROOT / "build", switch_ip=args.switch_ip, pool_size=args.pool_size) as svc:
            print(
                f"p4reduce: switch {svc.switch_address[0]}:{svc.switch_address[1]}, "
                f"controller {svc.controller} (logs in {svc.logs})",
                flush=True,
            )
            if args.serve:
                print(f"export {ENV_CONTROLLER}={svc.controller}   # Ctrl-C stops both", flush=True)
                threading.Event().wait()
            environment = dict(os.environ, **{ENV_CONTROLLER: svc.controller})
            return subprocess.run(torchrun_command(torchrun), env=environment).returncode
    except LaunchError as error:
        print(f"p4reduce: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
