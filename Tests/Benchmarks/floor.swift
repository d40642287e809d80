// floor.c in Swift: the same work (libcurl's multi interface, each body kept in memory, its payload
// and a one-line record each written to a temporary file and renamed into place, a run-log line,
// one syncfs), to tell what the language and its runtime cost from what the runner's engine costs.
//
//   --mode callbacks  as floor.c --writer: the transfers' thread hands finished bodies to a writer
//                     thread through a locked queue; no Swift task at all.
//   --mode tasks      a Swift task per job (at most P at once, in a task group, as the runner
//                     runs its jobs): the task hands its transfer to the transfers' thread, awaits
//                     its end (a continuation the transfers' thread resumes) and writes its files
//                     itself; nothing else (no policy, no deadline, no task manager, no checks).
//   --mode readahead  a task per job as in tasks, but a job no longer holds a transfer slot while
//                     it writes its files: the transfers' thread keeps the transfers handed over
//                     to it waiting in a queue and starts the next itself as soon as one ends, so
//                     P bounds the transfers, not the jobs; the feeder admits up to 4P job tasks
//                     (a slot comes free when a job has written its files). A task wakes the
//                     transfers' thread only when that thread ran out of waiting transfers.
//   --mode readahead-writer
//                     as readahead, with every job task (and the feeder) on one writer thread of
//                     its own, a TaskExecutor the group's tasks inherit (Task(executorPreference:)):
//                     a locked queue it empties in batches, woken only when it sleeps; the job
//                     code is nonisolated, so nothing hops to Swift's global pool.
//
// Only Glibc, Dispatch and Synchronization (no Foundation: what its loading costs is the runner's).
// Usage: floor-swift LIST OUT-DIR [--parallel P] [--mode callbacks|tasks|readahead|readahead-writer]
//                    [--cacert FILE]
//   LIST as floor.c's: lines of "PATH URL".
// Build: swiftc -O -import-objc-header Tests/Benchmarks/floor-shim.h Tests/Benchmarks/floor.swift -lcurl -o floor-swift
import Dispatch
import Glibc
import Synchronization

/// One job; its fields are touched by one thread at a time (the transfer's, then the writer's
/// or its task's), handed over under a lock or through a continuation.
final class Job: @unchecked Sendable {
    let path: String
    let url: String
    let index: Int
    var body: [UInt8] = []
    var status = 0
    var ended: CheckedContinuation<Void, Never>?

    init(path: String, url: String, index: Int) {
        self.path = path
        self.url = url
        self.index = index
    }
}

func fail(_ what: String) -> Never {
    let message = "floor-swift: \(what): \(String(cString: strerror(errno)))\n"
    _ = message.withCString { write(2, $0, strlen($0)) }
    exit(1)
}

nonisolated(unsafe) var out: Int32 = -1

/// Writes `bytes` to `path` atomically: a new temporary file beside it, one write, close, rename.
func commit(_ path: String, _ bytes: ArraySlice<UInt8>, _ index: Int) {
    let folder = path.lastIndex(of: "/").map { path[...$0] } ?? ""
    let temporary = "\(folder).tmp-\(index)"
    let fd = openat(out, temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    if fd < 0 { fail(temporary) }
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    if written != bytes.count { fail("write") }
    close(fd)
    if renameat(out, temporary, out, path) != 0 { fail("rename") }
}

func timestamp() -> String {
    var now = time(nil)
    var utc = tm()
    gmtime_r(&now, &utc)
    return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 32) { buffer in
        strftime(buffer.baseAddress!, 32, "%Y-%m-%dT%H:%M:%SZ", &utc)
        return String(cString: buffer.baseAddress!)
    }
}

/// The run log, written in batches (64 KiB), as floor.c's; `append` takes a lock, as any thread may call it.
final class RunLog: @unchecked Sendable {  // its buffer is behind `lock`
    private let fd: Int32
    private let lock = Mutex(())
    private var buffer: [UInt8] = []

    init(fd: Int32) {
        self.fd = fd
        buffer.reserveCapacity(1 << 16)
    }

    func append(_ line: [UInt8]) {
        lock.withLock { _ in
            if buffer.count + line.count > 1 << 16 { flushLocked() }
            buffer.append(contentsOf: line)
        }
    }

    func flush() { lock.withLock { _ in flushLocked() } }

    private func flushLocked() {
        if !buffer.isEmpty, buffer.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) != buffer.count { fail("run log") }
        buffer.removeAll(keepingCapacity: true)
    }
}

/// The files of one finished job: its payload, its record, its run-log line.
func finish(_ job: Job, log: RunLog) {
    commit(job.path, job.body[...], job.index)
    let name = job.path.lastIndex(of: "/").map { job.path[job.path.index(after: $0)...] } ?? job.path[...]
    let now = timestamp()
    var record = Array(
        ("{\"key\":\"\(job.index)\",\"url\":\"\(job.url)\",\"status\":\"succeeded\",\"httpStatus\":\(job.status),"
            + "\"bytes\":\(job.body.count),\"payload\":\"\(job.path)\",\"startedAt\":\"\(now)\",\"finishedAt\":\"\(now)\",\"attempts\":1}\n").utf8)
    commit("results/\(name).json", record[..<(record.count - 1)], job.index)
    log.append(record)
    record = []
}

// MARK: - Arguments

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    print("usage: floor-swift LIST OUT-DIR [--parallel P] [--mode callbacks|tasks|readahead|readahead-writer] [--cacert FILE]")
    exit(2)
}
enum Mode: String {
    case callbacks, tasks, readahead
    case readaheadWriter = "readahead-writer"
}
var parallel = 32
var mode = Mode.callbacks
var cacert: String?
var argument = 3
while argument < arguments.count {
    let value = argument + 1 < arguments.count ? arguments[argument + 1] : ""
    switch arguments[argument] {
    case "--parallel": parallel = Int(value) ?? 0
    case "--mode" where Mode(rawValue: value) != nil: mode = Mode(rawValue: value)!
    case "--cacert": cacert = value
    default: print("floor-swift: unknown argument '\(arguments[argument])'"); exit(2)
    }
    argument += 2
}
guard (1...1024).contains(parallel) else { print("floor-swift: --parallel must be 1 to 1024"); exit(2) }

/// The list's jobs, read as they are taken.
final class JobList: @unchecked Sendable {  // taken from by one thread at a time
    private let file: UnsafeMutablePointer<FILE>
    private var index = 0

    init(_ path: String) {
        guard let file = fopen(path, "r") else { fail(path) }
        self.file = file
    }

    func next() -> Job? {
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0 {
            let text = String(cString: line!).split(separator: "\n").first ?? ""
            let parts = text.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { continue }
            index += 1
            return Job(path: String(parts[0]), url: String(parts[1]), index: index)
        }
        return nil
    }
}

let list = JobList(arguments[1])
out = open(arguments[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC)
if out < 0 { fail(arguments[2]) }
mkdirat(out, "results", 0o755)
let logFD = openat(out, "runs.jsonl", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
if logFD < 0 { fail("runs.jsonl") }
let runLog = RunLog(fd: logFD)

// MARK: - Transfers

curl_global_init(Int(CURL_GLOBAL_DEFAULT))
let multi = curl_multi_init()!
_ = floor_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, parallel)
_ = floor_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, parallel)
// The connections kept between transfers: P, so that the tasks' bursts (fewer handles in the multi
// handle for a moment) do not shrink the cache and close connections the next burst would reuse.
_ = floor_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, parallel)

let onBody: floor_write_callback = { data, size, count, user in
    let job = Unmanaged<Job>.fromOpaque(user!).takeUnretainedValue()
    let length = size * count
    data!.withMemoryRebound(to: UInt8.self, capacity: length) { job.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: length)) }
    return length
}

/// The transfers' state, touched only on the transfers' thread.
final class Transfers: @unchecked Sendable {
    private var idle: [UnsafeMutableRawPointer] = []
    var running = 0

    func start(_ job: Job) {
        let easy = idle.popLast() ?? curl_easy_init()!
        curl_easy_reset(easy)
        let me = Unmanaged.passRetained(job).toOpaque()
        _ = floor_setopt_pointer(easy, CURLOPT_URL, job.url)
        _ = floor_setopt_pointer(easy, CURLOPT_WRITEFUNCTION, unsafeBitCast(onBody, to: UnsafeRawPointer.self))
        _ = floor_setopt_pointer(easy, CURLOPT_WRITEDATA, me)
        _ = floor_setopt_pointer(easy, CURLOPT_PRIVATE, me)
        _ = floor_setopt_long(easy, CURLOPT_PIPEWAIT, 1)
        _ = floor_setopt_pointer(easy, CURLOPT_ACCEPT_ENCODING, "")
        if let cacert { _ = floor_setopt_pointer(easy, CURLOPT_CAINFO, cacert) }
        curl_multi_add_handle(multi, easy)
        running += 1
    }

    /// Runs the transfers that can, and returns those that ended (their status set).
    func perform() -> [Job] {
        var still: Int32 = 0
        curl_multi_perform(multi, &still)
        var ended: [Job] = []
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let job = Unmanaged<Job>.fromOpaque(floor_private(easy)!).takeRetainedValue()
            job.status = floor_status(easy)
            if message.pointee.data.result != CURLE_OK || job.status != 200 { fail("\(job.url) failed") }
            curl_multi_remove_handle(multi, easy)
            idle.append(easy)
            running -= 1
            ended.append(job)
        }
        return ended
    }

    deinit {
        for easy in idle { curl_easy_cleanup(easy) }
    }
}

/// Runs `body` on a thread of its own; returns it to join.
func thread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
    final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    var thread = pthread_t()
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    guard pthread_create(&thread, nil, { box in
        Unmanaged<Box>.fromOpaque(box!).takeRetainedValue().body()
        return nil
    }, box) == 0 else { fail("pthread_create") }
    return thread
}

/// Slots for the jobs' tasks (P, or 4P with read-ahead): `acquire` suspends the feeder while every
/// slot is taken.
final class Slots: Sendable {
    private let state: Mutex<(free: Int, waiting: [CheckedContinuation<Void, Never>])>

    init(_ count: Int) { state = Mutex((count, [])) }

    func acquire() async {
        let taken = state.withLock { state in
            guard state.free > 0 else { return false }
            state.free -= 1
            return true
        }
        if taken { return }
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}

/// The read-ahead modes' hand-over to the transfers' thread: the transfers whose job task asked
/// for them, waiting for one of the P slots, and whether that thread ran out of them (then the
/// next hand-over wakes it; otherwise it finds the next transfer itself when one ends).
final class ReadAhead: Sendable {
    private let state = Mutex<(waiting: [Job], hungry: Bool)>(([], false))

    /// Hands `job` (its continuation set) to the transfers' thread; wakes it if it ran out.
    func handOver(_ job: Job) {
        let wake = state.withLock { state in
            state.waiting.append(job)
            defer { state.hungry = false }
            return state.hungry
        }
        if wake { curl_multi_wakeup(multi) }
    }

    /// On the transfers' thread: the waiting transfers, up to `free`, oldest first. If they do not
    /// fill the free slots, the thread is hungry: the next hand-over wakes it.
    func take(_ free: Int) -> [Job] {
        state.withLock { state in
            let count = min(free, state.waiting.count)
            state.hungry = count < free
            guard count > 0 else { return [] }
            defer { state.waiting.removeFirst(count) }
            return Array(state.waiting[..<count])
        }
    }
}

/// A task executor over one thread of its own: a locked queue of jobs that the thread empties in
/// batches; whoever enqueues wakes it only when it sleeps.
final class WriterExecutor: TaskExecutor, @unchecked Sendable {  // queue and sleeping behind `mutex`
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let ready = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var queue: [UnownedJob] = []
    private var sleeping = false

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(ready, nil)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        pthread_mutex_lock(mutex)
        queue.append(job)
        let wake = sleeping
        sleeping = false
        pthread_mutex_unlock(mutex)
        if wake { pthread_cond_signal(ready) }
    }

    /// The thread's loop: runs what is queued, batch after batch, and never returns (the process
    /// ends while it sleeps).
    func run() -> Never {
        let me = asUnownedTaskExecutor()
        var batch: [UnownedJob] = []
        while true {
            pthread_mutex_lock(mutex)
            while queue.isEmpty {
                sleeping = true
                pthread_cond_wait(ready, mutex)
            }
            swap(&batch, &queue)
            pthread_mutex_unlock(mutex)
            for job in batch { job.runSynchronously(on: me) }
            batch.removeAll(keepingCapacity: true)
        }
    }
}

/// The read-ahead modes' jobs: a task each, at most `alive` at once (a slot comes free when a job
/// has written its files, not when its transfer ends); each hands its transfer over, awaits its
/// end and writes its files. Then the run log is flushed and `stop` called. Nonisolated, as all it
/// calls: every part of it runs on the executor its task prefers (the writer thread), or on
/// Swift's global pool when it prefers none.
nonisolated func runReadAhead(
    _ jobs: JobList, alive: Int, through readAhead: ReadAhead, log: RunLog, stop: @Sendable () -> Void
) async {
    let admitted = Slots(alive)
    await withDiscardingTaskGroup { group in
        while let job = jobs.next() {
            await admitted.acquire()
            group.addTask {
                await withCheckedContinuation { continuation in
                    job.ended = continuation
                    readAhead.handOver(job)
                }
                job.ended = nil
                finish(job, log: log)
                admitted.release()
            }
        }
    }
    log.flush()
    stop()
}

switch mode {
case .callbacks:
    // As floor.c --writer: finished jobs to a writer thread through a locked queue and a condition.
    final class Handover: @unchecked Sendable {  // behind its mutex
        var mutex = pthread_mutex_t()
        var ready = pthread_cond_t()
        var queue: [Job] = []
        var done = false
        init() {
            pthread_mutex_init(&mutex, nil)
            pthread_cond_init(&ready, nil)
        }
    }
    let handover = Handover()
    let writer = thread {
        while true {
            pthread_mutex_lock(&handover.mutex)
            while handover.queue.isEmpty && !handover.done { pthread_cond_wait(&handover.ready, &handover.mutex) }
            let batch = handover.queue
            handover.queue.removeAll()
            let done = handover.done
            pthread_mutex_unlock(&handover.mutex)
            for job in batch { finish(job, log: runLog) }
            runLog.flush()
            if done { return }
        }
    }
    let transfers = Transfers()
    var more = true
    while more || transfers.running > 0 {
        while more && transfers.running < parallel {
            guard let job = list.next() else {
                more = false
                break
            }
            transfers.start(job)
        }
        let ended = transfers.perform()
        if !ended.isEmpty {
            pthread_mutex_lock(&handover.mutex)
            let wasEmpty = handover.queue.isEmpty
            handover.queue.append(contentsOf: ended)
            pthread_mutex_unlock(&handover.mutex)
            if wasEmpty { pthread_cond_signal(&handover.ready) }
            if more { continue }  // slots came free: fill them before waiting for the network
        }
        if transfers.running > 0 { curl_multi_poll(multi, nil, 0, 1000, nil) }
    }
    pthread_mutex_lock(&handover.mutex)
    handover.done = true
    pthread_mutex_unlock(&handover.mutex)
    pthread_cond_signal(&handover.ready)
    pthread_join(writer, nil)
case .tasks:
    // A task per job, at most `parallel` at once; the transfers' thread takes new jobs from an
    // inbox (woken by curl_multi_wakeup) and resumes each job's task when its transfer ended.
    let inbox = Mutex<[Job]>([])
    let stop = Atomic<Bool>(false)
    let transfersThread = thread {
        let transfers = Transfers()
        while !stop.load(ordering: .acquiring) || transfers.running > 0 {
            for job in inbox.withLock({ jobs in defer { jobs.removeAll(keepingCapacity: true) }; return jobs }) {
                transfers.start(job)
            }
            for job in transfers.perform() { job.ended!.resume() }
            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
    }
    let finished = DispatchSemaphore(value: 0)
    let slots = Slots(parallel)
    Task {
        await withDiscardingTaskGroup { group in
            while let job = list.next() {
                await slots.acquire()
                group.addTask {
                    await withCheckedContinuation { continuation in
                        job.ended = continuation
                        // The transfers' thread is woken only when the inbox was empty: a wake-up
                        // on its way takes this job too.
                        let wasEmpty = inbox.withLock { jobs in
                            jobs.append(job)
                            return jobs.count == 1
                        }
                        if wasEmpty { curl_multi_wakeup(multi) }
                    }
                    job.ended = nil
                    finish(job, log: runLog)
                    slots.release()
                }
            }
        }
        runLog.flush()
        stop.store(true, ordering: .releasing)
        curl_multi_wakeup(multi)
        finished.signal()
    }
    finished.wait()
    pthread_join(transfersThread, nil)
case .readahead, .readaheadWriter:
    // The transfers' thread starts the waiting transfers that fit before it resumes the tasks of
    // those that ended: no slot waits for a task to be scheduled.
    let readAhead = ReadAhead()
    let stop = Atomic<Bool>(false)
    let slots = parallel
    let transfersThread = thread {
        let transfers = Transfers()
        var ended: [Job] = []
        while true {
            for job in readAhead.take(slots - transfers.running) { transfers.start(job) }
            for job in ended { job.ended!.resume() }
            if transfers.running == 0 && stop.load(ordering: .acquiring) { break }
            ended = transfers.perform()
            if ended.isEmpty { curl_multi_poll(multi, nil, 0, 1000, nil) }
        }
    }
    let finished = DispatchSemaphore(value: 0)
    let done: @Sendable () -> Void = {
        stop.store(true, ordering: .releasing)
        curl_multi_wakeup(multi)
        finished.signal()
    }
    // 4P job tasks alive: P transferring, the others waiting for a slot or writing their files.
    if mode == .readaheadWriter {
        let writer = WriterExecutor()
        pthread_detach(thread { writer.run() })
        Task(executorPreference: writer) { await runReadAhead(list, alive: 4 * slots, through: readAhead, log: runLog, stop: done) }
    } else {
        Task { await runReadAhead(list, alive: 4 * slots, through: readAhead, log: runLog, stop: done) }
    }
    finished.wait()
    pthread_join(transfersThread, nil)
}

if floor_syncfs(out) != 0 { fail("syncfs") }
