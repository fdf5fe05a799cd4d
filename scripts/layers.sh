#!/bin/sh
# Print the layering of src/ as the build declares it (cmake/layers.cmake),
# after checking the code against it (cmake/check_layers.cmake): one line
# per folder, bottom layer first: its layer, its name, the folders it
# uses. docs/DESIGN.md shows this output (ctest lint/layers_doc compares).
# Exits non-zero, saying why, on a circle or an include the table does
# not allow.
cd "$(dirname "$0")/.." && exec cmake -DSRC=src -DMODE=print -P cmake/check_layers.cmake
