#pragma once
// unique_fd lives with the host's other POSIX helpers; this name stays for the files that include it.
#include "posix.hpp"
