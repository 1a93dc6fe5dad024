import sys

from tensorfabric.cli.main import main

sys.exit(main())
