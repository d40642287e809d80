// The floor of a runner job, in C: what the output contract alone costs on top of curl's work.
//
// libcurl's multi interface fetches every URL of a list, P at once, as `curl --parallel` does
// (HTTP/2 streams share a connection when the server offers it).
// Each body is kept in memory; then, for each job, what the contract asks and nothing more:
// the payload written to a temporary file (O_CREAT|O_EXCL, one write, close) and renamed into
// place, a one-line JSON record written the same way, its line added to a run log (written in
// batches, not a write per line), and one syncfs at the end. No validation of the body, no hash,
// no policy, no deadline, no task manager: whatever the runner spends above this program is
// the engine's own cost.
//
// With --writer, the files are written by a second thread (the transfers' thread hands each
// finished body over through a locked queue), so the two cores share the work as the runner's
// design lets them.
//
// Usage: floor LIST OUT-DIR [--parallel P] [--writer] [--cacert FILE]
//   LIST    lines of "PATH URL": the payload of URL goes to OUT-DIR/PATH (its folder must exist),
//           its record to OUT-DIR/results/NAME.json (NAME: PATH's last part)
// Build: cc -O2 -o floor Tests/Benchmarks/floor.c -lcurl -lpthread
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct job {
    char *path;  // where the payload goes, relative to the output folder
    char *url;
    long index;
    char *body;
    size_t length, capacity;
    long status;
    struct job *next;
};

static int out;  // the output folder
static int writer_thread;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready = PTHREAD_COND_INITIALIZER;
static struct job *queue_head, *queue_tail;
static int transfers_done;

static void fail(const char *what) {
    fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
    exit(1);
}

static size_t on_body(char *data, size_t size, size_t count, void *user) {
    struct job *job = user;
    size_t n = size * count;
    if (job->length + n > job->capacity) {
        job->capacity = (job->length + n) * 2;
        job->body = realloc(job->body, job->capacity);
    }
    memcpy(job->body + job->length, data, n);
    job->length += n;
    return n;
}

// Writes `bytes` to `path` atomically: a new temporary file beside it, one write, close, rename.
static void commit(const char *path, const char *bytes, size_t length, long index) {
    char temporary[4200];
    const char *slash = strrchr(path, '/');
    int folder = slash ? (int)(slash - path) + 1 : 0;
    snprintf(temporary, sizeof temporary, "%.*s.tmp-%ld", folder, path, index);
    int fd = openat(out, temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) fail(temporary);
    if (write(fd, bytes, length) != (ssize_t)length) fail("write");
    close(fd);
    if (renameat(out, temporary, out, path) != 0) fail("rename");
}

static char run_log[1 << 16];
static size_t run_log_length;
static int run_log_fd;

static void flush_run_log(void) {
    if (run_log_length && write(run_log_fd, run_log, run_log_length) != (ssize_t)run_log_length) fail("run log");
    run_log_length = 0;
}

// The files of one finished job: its payload, its record, its run-log line.
static void finish(struct job *job) {
    commit(job->path, job->body, job->length, job->index);
    const char *slash = strrchr(job->path, '/');
    char record_path[4200];
    snprintf(record_path, sizeof record_path, "results/%s.json", slash ? slash + 1 : job->path);
    char record[9000];
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
    int length = snprintf(record, sizeof record,
        "{\"key\":\"%ld\",\"url\":\"%s\",\"status\":\"succeeded\",\"httpStatus\":%ld,"
        "\"bytes\":%zu,\"payload\":\"%s\",\"startedAt\":\"%s\",\"finishedAt\":\"%s\",\"attempts\":1}\n",
        job->index, job->url, job->status, job->length, job->path, stamp, stamp);
    commit(record_path, record, (size_t)length - 1, job->index);
    if (run_log_length + (size_t)length > sizeof run_log) flush_run_log();
    memcpy(run_log + run_log_length, record, (size_t)length);
    run_log_length += (size_t)length;
    free(job->body);
    free(job->path);
    free(job);
}

static void *writer(void *unused) {
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (!queue_head && !transfers_done) pthread_cond_wait(&ready, &lock);
        struct job *batch = queue_head;
        queue_head = queue_tail = NULL;
        int done = transfers_done;
        pthread_mutex_unlock(&lock);
        while (batch) {
            struct job *next = batch->next;
            finish(batch);
            batch = next;
        }
        flush_run_log();
        if (done && !queue_head) return NULL;
    }
}

static void hand_over(struct job *job) {
    if (!writer_thread) {
        finish(job);
        return;
    }
    job->next = NULL;
    pthread_mutex_lock(&lock);
    int was_empty = queue_head == NULL;
    if (queue_tail) queue_tail->next = job; else queue_head = job;
    queue_tail = job;
    pthread_mutex_unlock(&lock);
    if (was_empty) pthread_cond_signal(&ready);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: floor LIST OUT-DIR [--parallel P] [--writer] [--cacert FILE]\n");
        return 2;
    }
    long parallel = 32;
    const char *cacert = NULL;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--parallel") && i + 1 < argc) parallel = atol(argv[++i]);
        else if (!strcmp(argv[i], "--writer")) writer_thread = 1;
        else if (!strcmp(argv[i], "--cacert") && i + 1 < argc) cacert = argv[++i];
        else { fprintf(stderr, "floor: unknown argument '%s'\n", argv[i]); return 2; }
    }
    if (parallel < 1 || parallel > 1024) { fprintf(stderr, "floor: --parallel must be 1 to 1024\n"); return 2; }
    FILE *list = fopen(argv[1], "r");
    if (!list) fail(argv[1]);
    out = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (out < 0) fail(argv[2]);
    mkdirat(out, "results", 0755);
    run_log_fd = openat(out, "runs.jsonl", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (run_log_fd < 0) fail("runs.jsonl");

    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, parallel);
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, parallel);
    pthread_t thread;
    if (writer_thread && pthread_create(&thread, NULL, writer, NULL) != 0) fail("thread");

    char line[4096];
    long index = 0, running = 0, failed = 0;
    int more = 1;
    CURL *idle[1024];
    int idle_count = 0;
    while (more || running) {
        while (more && running < parallel) {
            if (!fgets(line, sizeof line, list)) { more = 0; break; }
            line[strcspn(line, "\r\n")] = 0;
            char *space = strchr(line, ' ');
            if (!space) continue;
            *space = 0;
            struct job *job = calloc(1, sizeof *job);
            size_t length = strlen(space + 1) + (size_t)(space - line) + 2;
            job->path = memcpy(malloc(length), line, length);  // "PATH\0URL\0"
            job->url = job->path + (space - line) + 1;
            job->index = ++index;
            CURL *easy = idle_count ? idle[--idle_count] : curl_easy_init();
            curl_easy_reset(easy);
            curl_easy_setopt(easy, CURLOPT_URL, job->url);
            curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
            curl_easy_setopt(easy, CURLOPT_WRITEDATA, job);
            curl_easy_setopt(easy, CURLOPT_PRIVATE, job);
            curl_easy_setopt(easy, CURLOPT_PIPEWAIT, 1L);
            curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
            if (cacert) curl_easy_setopt(easy, CURLOPT_CAINFO, cacert);
            curl_multi_add_handle(multi, easy);
            running++;
        }
        int still;
        curl_multi_perform(multi, &still);
        CURLMsg *message;
        int left, finished = 0;
        while ((message = curl_multi_info_read(multi, &left))) {
            if (message->msg != CURLMSG_DONE) continue;
            CURL *easy = message->easy_handle;
            struct job *job;
            curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&job);
            curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &job->status);
            if (message->data.result != CURLE_OK || job->status != 200) failed++;
            curl_multi_remove_handle(multi, easy);
            idle[idle_count++] = easy;
            running--;
            finished++;
            hand_over(job);
        }
        // Slots came free: fill them before waiting for the network.
        if (finished && more) continue;
        if (running) curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    if (writer_thread) {
        pthread_mutex_lock(&lock);
        transfers_done = 1;
        pthread_mutex_unlock(&lock);
        pthread_cond_signal(&ready);
        pthread_join(thread, NULL);
    } else {
        flush_run_log();
    }
    if (syncfs(out) != 0) fail("syncfs");
    while (idle_count) curl_easy_cleanup(idle[--idle_count]);
    curl_multi_cleanup(multi);
    if (failed) fprintf(stderr, "floor: %ld of %ld failed\n", failed, index);
    return failed ? 1 : 0;
}
