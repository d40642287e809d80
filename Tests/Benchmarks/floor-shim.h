// What floor.swift needs of libcurl and Linux that Swift cannot call directly: curl_easy_setopt
// and its kin are variadic, syncfs needs _GNU_SOURCE.
#define _GNU_SOURCE
#include <curl/curl.h>
#include <stddef.h>
#include <unistd.h>

static inline CURLcode floor_setopt_pointer(CURL *easy, CURLoption option, const void *value) { return curl_easy_setopt(easy, option, value); }
static inline CURLcode floor_setopt_long(CURL *easy, CURLoption option, long value) { return curl_easy_setopt(easy, option, value); }
static inline CURLMcode floor_multi_setopt_long(CURLM *multi, CURLMoption option, long value) { return curl_multi_setopt(multi, option, value); }
static inline long floor_status(CURL *easy) {
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    return status;
}
static inline void *floor_private(CURL *easy) {
    char *job = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, &job);
    return job;
}
static inline int floor_syncfs(int fd) { return syncfs(fd); }
typedef size_t (*floor_write_callback)(char *data, size_t size, size_t count, void *user);
