// Must NOT compile: the ir layer including a header of the cpu layer above it. The build
// gives each layer an include root with only its own and lower layers' headers
// (CMakeLists.txt, kiln_layer), so "cpu/graph.hpp" is not found here. The test
// layering_upward_include_fails builds this file and expects exactly that error.
#include "cpu/graph.hpp"
#include "ir/graph.hpp"
