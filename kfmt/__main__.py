import sys

from kfmt.cli import main

sys.exit(main())
