import sys

from raytune_fed.cli import main

sys.exit(main())
