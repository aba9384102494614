# parley - build, run and test.
#
#   make run     install missing dependencies, build, serve on 127.0.0.1:8080
#   make test    install missing dependencies, build, run every test suite
#   make fuzz    build the libFuzzer harnesses (clang) and run each FUZZ_TIME seconds
#   make bench   benchmarks (never part of the tests)
#
# Every .c under src/ goes into one static library; src/app/main.c links it
# into build/parley. Every .c under tests/unit/ goes into build/unit-tests.
# New files are picked up without editing this file.
# SAN=1 builds into build-san/ with AddressSanitizer + UndefinedBehaviorSanitizer;
# TSAN=1 builds into build-tsan/ with ThreadSanitizer (the two cannot share a build).

CC ?= cc
SAN ?= 0
TSAN ?= 0
PKGS := libmicrohttpd jansson sqlite3 libpcre2-8 libutf8proc libcurl gnutls zlib
# audio/ and speech/: FFmpeg, pocketsphinx, espeak-ng; flite has no .pc file.
PKGS += libavformat libavcodec libavutil libswresample pocketsphinx sphinxbase espeak-ng
FLITE_LIBS := -lflite_cmu_us_slt -lflite_cmu_us_kal16 -lflite_cmu_us_kal -lflite_cmu_us_awb \
              -lflite_cmu_us_rms -lflite_usenglish -lflite_cmulex -lflite

ifeq ($(TSAN),1)
  BUILD := build-tsan
  SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
  OPT := -O1 -g
else ifeq ($(SAN),1)
  BUILD := build-san
  SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  OPT := -O1 -g
else
  BUILD := build
  SANFLAGS :=
  OPT := -O2 -g
endif

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes
ifeq ($(CI),true)
  WARN += -Werror
endif

CFLAGS_ALL := -std=c17 -D_GNU_SOURCE $(OPT) $(WARN) $(SANFLAGS) -pthread -Isrc -MMD -MP \
              $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(CFLAGS)
LDLIBS_ALL := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lwslay $(FLITE_LIBS) -lm -pthread $(LDLIBS)

LIB_SRC := $(filter-out src/app/main.c,$(shell find src -name '*.c' | sort))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(shell find tests/unit -name '*.c' | sort)
# The fuzz harnesses go into the unit binary too, built with FUZZ_REPLAY so
# fuzz_seeds_replay feeds them their seed folders (tests/fuzz/fuzz.h).
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_OBJ := $(FUZZ_SRC:%.c=$(BUILD)/obj/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o) $(FUZZ_OBJ)
$(FUZZ_OBJ): CFLAGS_ALL += -DFUZZ_REPLAY

.PHONY: all run test test-unit test-unit-san test-api deps fuzz bench clean npm

all: $(BUILD)/parley $(BUILD)/unit-tests

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/libparley.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/parley: $(BUILD)/obj/src/app/main.o $(BUILD)/libparley.a
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/unit-tests: $(TEST_OBJ) $(BUILD)/libparley.a
	$(CC) $(CFLAGS_ALL) -Itests/unit -o $@ $^ $(LDLIBS_ALL)

deps:
	@bash scripts/deps.sh

npm:
	@bash scripts/npm.sh

run: deps
	@$(MAKE) --no-print-directory $(BUILD)/parley
	./$(BUILD)/parley serve $(ARGS)

# The whole suite: C unit tests (and their sanitizer runs: ASan+UBSan under CI
# or SAN_TOO=1, ThreadSanitizer under TSAN_TOO=1),
# then the API tests with the official SDKs. tests/run.sh prints one line
# `N passed, N failed` summing every suite and fails if any suite failed.
test: deps npm
	@$(MAKE) --no-print-directory all
	@bash tests/run.sh

fuzz:
	@bash tests/fuzz/run.sh $(FUZZ_TIME)

bench: all
	@bash bench/run.sh

clean:
	rm -rf build build-san build-tsan build-fuzz build-clang

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/obj/src/app/main.d
