/* test_config.c - the option table: defaults, environment, flags, and bad
 * values named by their option. */
#include "test.h"

#include <stdlib.h>

#include "app/config.h"
#include "base/err.h"
#include "engine/manager.h"

static void clear_env(void) {
  const char *vars[] = {"PARLEY_HOST", "PARLEY_PORT", "PARLEY_API_KEY", "PARLEY_DATA_DIR", "PARLEY_MODELS_DIR",
                        "PARLEY_LOG_LEVEL", "PARLEY_MAX_BODY", "PARLEY_NO_AUTH", "PARLEY_ACCESS_LOG",
                        "PARLEY_KEEP_ALIVE", "PARLEY_MEMORY_BUDGET", "PARLEY_CACHE_TYPE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

TEST(config_defaults) {
  clear_env();
  setenv("HOME", "/home/someone", 1);
  unsetenv("XDG_DATA_HOME");
  config c;
  ASSERT_INT_EQ(config_load(&c, 0, NULL), 0);
  EXPECT_STR_EQ(c.host, "127.0.0.1");
  EXPECT_INT_EQ(c.port, 8080);
  EXPECT_INT_EQ(c.n_api_keys, 0);
  EXPECT_STR_EQ(c.data_dir, "/home/someone/.local/share/parley");
  EXPECT_STR_EQ(c.models_dir, "/home/someone/.local/share/parley/models");
  EXPECT_INT_EQ(c.max_body, 32 * 1024 * 1024);
  EXPECT_INT_EQ(c.max_upload, 512LL * 1024 * 1024);
  EXPECT_TRUE(c.access_log);
  EXPECT_FALSE(c.no_auth);
  config_free(&c);
}

TEST(config_env_then_flags_override) {
  clear_env();
  setenv("PARLEY_PORT", "9000", 1);
  setenv("PARLEY_API_KEY", "k1, k2 ,,k3", 1);
  setenv("PARLEY_DATA_DIR", "/tmp/pd", 1);
  setenv("PARLEY_MAX_BODY", "2M", 1);
  char *argv[] = {"--port", "9100", "--host=::1", "--no-auth", "--access-log=false", "--max-upload", "1G"};
  config c;
  ASSERT_INT_EQ(config_load(&c, 7, argv), 0);
  EXPECT_INT_EQ(c.port, 9100);
  EXPECT_STR_EQ(c.host, "::1");
  ASSERT_INT_EQ(c.n_api_keys, 3);
  EXPECT_STR_EQ(c.api_keys[0], "k1");
  EXPECT_STR_EQ(c.api_keys[1], "k2");
  EXPECT_STR_EQ(c.api_keys[2], "k3");
  EXPECT_STR_EQ(c.models_dir, "/tmp/pd/models");
  EXPECT_INT_EQ(c.max_body, 2 * 1024 * 1024);
  EXPECT_INT_EQ(c.max_upload, 1024LL * 1024 * 1024);
  EXPECT_TRUE(c.no_auth);
  EXPECT_FALSE(c.access_log);
  config_free(&c);
}

TEST(config_bad_values_name_the_option) {
  clear_env();
  config c;
  char *a1[] = {"--port", "70000"};
  EXPECT_INT_EQ(config_load(&c, 2, a1), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "--port: invalid value '70000'");
  config_free(&c);
  char *a2[] = {"--max-body", "12X"};
  EXPECT_INT_EQ(config_load(&c, 2, a2), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "--max-body: invalid size '12X'");
  config_free(&c);
  char *a3[] = {"--bogus"};
  EXPECT_INT_EQ(config_load(&c, 1, a3), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "unknown option '--bogus'");
  config_free(&c);
  char *a4[] = {"--port"};
  EXPECT_INT_EQ(config_load(&c, 1, a4), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "--port: missing value");
  config_free(&c);
  setenv("PARLEY_NO_AUTH", "maybe", 1);
  EXPECT_INT_EQ(config_load(&c, 0, NULL), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "PARLEY_NO_AUTH: invalid value 'maybe'");
  config_free(&c);
}

TEST(config_loopback_detection) {
  EXPECT_TRUE(config_host_is_loopback("127.0.0.1"));
  EXPECT_TRUE(config_host_is_loopback("127.5.6.7"));
  EXPECT_TRUE(config_host_is_loopback("::1"));
  EXPECT_TRUE(config_host_is_loopback("localhost"));
  EXPECT_FALSE(config_host_is_loopback("0.0.0.0"));
  EXPECT_FALSE(config_host_is_loopback("::"));
  EXPECT_FALSE(config_host_is_loopback("192.168.1.2"));
}

TEST(config_keep_alive_and_memory_budget) {
  clear_env();
  config c;
  ASSERT_INT_EQ(config_load(&c, 0, NULL), 0);
  EXPECT_INT_EQ(c.keep_alive_ms, 5 * 60 * 1000);
  uint64_t phys = manager_physical_memory();
  if (phys) { /* 75% of RAM, give or take rounding */
    EXPECT_TRUE(c.memory_budget > 0);
    EXPECT_NEAR((double)c.memory_budget, (double)phys * 0.75, 1.0);
  }
  config_free(&c);
  setenv("PARLEY_KEEP_ALIVE", "-1", 1);
  setenv("PARLEY_MEMORY_BUDGET", "none", 1);
  ASSERT_INT_EQ(config_load(&c, 0, NULL), 0);
  EXPECT_INT_EQ(c.keep_alive_ms, -1);
  EXPECT_INT_EQ(c.memory_budget, -1);
  config_free(&c);
  char *a1[] = {"--keep-alive", "30s", "--memory-budget", "8G"};
  ASSERT_INT_EQ(config_load(&c, 4, a1), 0);
  EXPECT_INT_EQ(c.keep_alive_ms, 30000);
  EXPECT_INT_EQ(c.memory_budget, 8LL * 1024 * 1024 * 1024);
  config_free(&c);
  char *a2[] = {"--keep-alive=0", "--memory-budget=1T"};
  ASSERT_INT_EQ(config_load(&c, 2, a2), 0);
  EXPECT_INT_EQ(c.keep_alive_ms, 0);
  EXPECT_INT_EQ(c.memory_budget, 1024LL * 1024 * 1024 * 1024);
  config_free(&c);
  if (phys) {
    char *a3[] = {"--memory-budget", "50%"};
    ASSERT_INT_EQ(config_load(&c, 2, a3), 0);
    EXPECT_NEAR((double)c.memory_budget, (double)phys * 0.5, 1.0);
    config_free(&c);
  }
  char *b1[] = {"--keep-alive", "5 minutes"};
  EXPECT_INT_EQ(config_load(&c, 2, b1), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "--keep-alive: keep-alive '5 minutes'");
  config_free(&c);
  char *b2[] = {"--memory-budget", "150%"};
  EXPECT_INT_EQ(config_load(&c, 2, b2), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "--memory-budget: invalid percentage '150%'");
  config_free(&c);
  char *b3[] = {"--memory-budget", "0"};
  EXPECT_INT_EQ(config_load(&c, 2, b3), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "--memory-budget: invalid memory budget '0'");
  config_free(&c);
  unsetenv("PARLEY_KEEP_ALIVE");
  unsetenv("PARLEY_MEMORY_BUDGET");
}

/* --cache-type / PARLEY_CACHE_TYPE: f16 by default, q8_0 and f32 by name,
 * anything else named in the error. */
TEST(config_cache_type) {
  clear_env();
  config c;
  ASSERT_INT_EQ(config_load(&c, 0, NULL), 0);
  EXPECT_INT_EQ(c.cache_type, MODEL_KV_F16);
  config_free(&c);
  setenv("PARLEY_CACHE_TYPE", "q8_0", 1);
  ASSERT_INT_EQ(config_load(&c, 0, NULL), 0);
  EXPECT_INT_EQ(c.cache_type, MODEL_KV_Q8_0);
  config_free(&c);
  char *a1[] = {"--cache-type", "f32"};
  ASSERT_INT_EQ(config_load(&c, 2, a1), 0);
  EXPECT_INT_EQ(c.cache_type, MODEL_KV_F32);
  config_free(&c);
  char *a2[] = {"--cache-type=q4_0"};
  EXPECT_INT_EQ(config_load(&c, 1, a2), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "--cache-type: invalid value 'q4_0' (expected f16, q8_0 or f32)");
  config_free(&c);
  setenv("PARLEY_CACHE_TYPE", "int8", 1);
  EXPECT_INT_EQ(config_load(&c, 0, NULL), ERR_INVALID);
  EXPECT_STR_CONTAINS(err_detail(), "PARLEY_CACHE_TYPE: invalid value 'int8'");
  config_free(&c);
  unsetenv("PARLEY_CACHE_TYPE");
}
