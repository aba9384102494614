/* version.h - parley's version, reported by `parley version`, /health and the
 * dialects' version endpoints. */
#ifndef PARLEY_BASE_VERSION_H
#define PARLEY_BASE_VERSION_H
#define PARLEY_VERSION "0.1.0"
#endif
