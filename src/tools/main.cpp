#include <kiln/core.hpp>

#include <iostream>

int main(int argc, char** argv) {
  (void)argc;
  (void)argv;
  std::cerr << "kiln: command line not built yet\n";
  return 2;
}
