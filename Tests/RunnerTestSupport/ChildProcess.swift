import Foundation
import Glibc
import Synchronization

/// A process a test starts (a server, PostgreSQL's tools, a watcher, a tool): the one way tests
/// start processes.
///
/// - It starts with an empty signal mask and every signal at its default. The test process blocks
///   SIGTERM, SIGINT and SIGHUP on its threads (the engine under test waits for them), and
///   Foundation's `Process` hands that mask on: a child started that way never sees SIGTERM.
/// - It leads a process group of its own, so ending it ends what it started too.
/// - It inherits no descriptor of the test process but its standard streams.
/// - It is ended and waited for whatever the test does: `terminate()` (SIGTERM, then SIGKILL to
///   its group after a grace), or when the last reference goes (a test that fails or throws), or,
///   for what is still running when the test process exits, by an `atexit` handler.
public final class ChildProcess: @unchecked Sendable {
    /// Where a standard stream goes.
    public enum Stream: Sendable {
        /// /dev/null.
        case null
        /// The test process's own.
        case inherit
        /// A file: read for standard input; created if needed and appended to for output.
        case file(String)
        /// A pipe: `input` (standard input) or `output` (standard output and error) is its other end.
        case pipe
    }

    public let processIdentifier: pid_t
    public let executable: String
    /// The write end of standard input's pipe (`stdin: .pipe`).
    public let input: FileHandle?
    /// The read end of the pipe standard output, and standard error if it too is `.pipe`, go to.
    public let output: FileHandle?
    private let state = Mutex<Int32?>(nil)  // the wait status, once reaped

    /// Starts `executable` with `arguments`. `environment` replaces the test's own (see
    /// `environment(adding:)`); nil keeps it.
    public init(
        _ executable: String, _ arguments: [String] = [], environment: [String: String]? = nil, directory: String? = nil,
        stdin: Stream = .null, stdout: Stream = .null, stderr: Stream = .inherit
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        var parentEnds: [Int32] = []  // closed on failure
        var childEnds: [Int32] = []  // closed in the parent once the child has them
        var inputEnd: Int32?
        var outputEnd: Int32?
        func pipeEnds() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else { throw Failure("pipe: \(String(cString: strerror(errno)))") }
            // Neither end may reach another child: a pipe stays open while any process holds it.
            fds.forEach { _ = fcntl($0, F_SETFD, FD_CLOEXEC) }
            return (fds[0], fds[1])
        }
        func redirect(_ stream: Stream, to target: Int32) throws {
            switch stream {
            case .inherit:
                break
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .file(let path):
                let flags = target == 0 ? O_RDONLY : O_WRONLY | O_CREAT | O_APPEND
                posix_spawn_file_actions_addopen(&actions, target, path, flags, 0o644)
            case .pipe where target == 0:
                let ends = try pipeEnds()
                inputEnd = ends.write
                parentEnds.append(ends.write)
                childEnds.append(ends.read)
                posix_spawn_file_actions_adddup2(&actions, ends.read, 0)
            case .pipe:
                if outputEnd == nil {
                    let ends = try pipeEnds()
                    outputEnd = ends.read
                    parentEnds.append(ends.read)
                    childEnds.append(ends.write)
                }
                posix_spawn_file_actions_adddup2(&actions, childEnds.last!, target)
            }
        }
        do {
            try redirect(stdin, to: 0)
            try redirect(stdout, to: 1)
            try redirect(stderr, to: 2)
        } catch {
            (parentEnds + childEnds).forEach { close($0) }
            throw error
        }
        if let directory {
            guard let addChdir = Self.addChdir else { throw Failure("this C library cannot start a process in another folder") }
            _ = addChdir(&actions, directory)
        }
        // Nothing but its three streams: a descriptor the test holds (a FIFO's read end, a
        // socket) must not live on in the child, where it would change what the test observes.
        if let addClosefrom = Self.addClosefrom { _ = addClosefrom(&actions, 3) }

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let environmentLines = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let envp: [UnsafeMutablePointer<CChar>?] = environmentLines.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        // Registered before any other thread can look: the atexit handler must know every child.
        let started = Self.live.withLock { live -> Int32 in
            let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
            if result == 0 { live.insert(pid) }
            return result
        }
        childEnds.forEach { close($0) }
        guard started == 0 else {
            parentEnds.forEach { close($0) }
            throw Failure("could not start \(executable): \(String(cString: strerror(started)))")
        }
        self.processIdentifier = pid
        self.executable = executable
        self.input = inputEnd.map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        self.output = outputEnd.map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        Self.installExitHandler
    }

    deinit {
        if reap(blocking: false) == nil { end(grace: .zero) }
    }

    /// The test's environment with `additions` laid over it.
    public static func environment(adding additions: [String: String]) -> [String: String] {
        ProcessInfo.processInfo.environment.merging(additions) { $1 }
    }

    /// Whether it still runs (a process that ended is reaped here).
    public var isRunning: Bool { reap(blocking: false) == nil }

    /// Its exit code, or the number of the signal that ended it (as Foundation's `Process` says);
    /// -1 while it runs.
    public var terminationStatus: Int32 {
        guard let status = reap(blocking: false) else { return -1 }
        return Self.exited(status) ? (status >> 8) & 0xFF : status & 0x7F
    }

    /// Whether a signal ended it (false while it runs).
    public var endedBySignal: Bool { reap(blocking: false).map { !Self.exited($0) } ?? false }

    /// Sends `signal` to the process itself.
    public func signal(_ signal: Int32) {
        if reap(blocking: false) == nil { kill(processIdentifier, signal) }
    }

    /// Waits until it ends (on a thread of its own, not the pool's).
    public func waitUntilExit() async { _ = await offThePool { [self] in reap(blocking: true) } }

    /// Waits (polling every 5 ms) until it ended or `timeout` passed: its `terminationStatus`, or
    /// nil if it still runs.
    public func exitStatus(upTo timeout: Duration) async -> Int32? {
        let end = ContinuousClock.now + timeout
        while isRunning {
            if ContinuousClock.now >= end { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return terminationStatus
    }

    /// Ends it: SIGTERM, up to `grace` to end, then SIGKILL; then its whole group is killed (what
    /// it started and left) and it is reaped. Returns at once if it already ended.
    public func terminate(grace: Duration = .seconds(5)) { end(grace: grace) }

    private func end(grace: Duration) {
        if reap(blocking: false) == nil {
            if grace > .zero {
                kill(processIdentifier, SIGTERM)
                let end = ContinuousClock.now + grace
                while reap(blocking: false) == nil && ContinuousClock.now < end { usleep(5_000) }
            }
            if reap(blocking: false) == nil { kill(-processIdentifier, SIGKILL) }
            _ = reap(blocking: true)
        }
        kill(-processIdentifier, SIGKILL)
    }

    /// The wait status once reaped (waiting for it if `blocking`), else nil.
    fileprivate func reap(blocking: Bool) -> Int32? {
        state.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            while true {
                let result = waitpid(processIdentifier, &raw, blocking ? 0 : WNOHANG)
                if result == processIdentifier { break }
                if result == 0 { return nil }
                if errno == EINTR { continue }
                raw = 0x7F00  // not ours to wait for any more (ECHILD): count it as gone
                break
            }
            status = raw
            Self.live.withLock { _ = $0.remove(processIdentifier) }
            return raw
        }
    }

    private static func exited(_ status: Int32) -> Bool { status & 0x7F == 0 }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34), which Swift's Glibc module leaves out.
    private static let addClosefrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    /// glibc's `posix_spawn_file_actions_addchdir_np` (2.29), which Swift's Glibc module leaves out.
    private static let addChdir: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32).self)
    }()

    // MARK: - What is left at exit

    private static let live = Mutex<Set<pid_t>>([])
    private static let exitActions = Mutex<[UUID: @Sendable () -> Void]>([:])

    /// Runs `action` when the test process exits, unless `cancelAtExit` was called with the id
    /// returned first: for what outlives the processes a test started (a server that went
    /// into the background).
    public static func atExit(_ action: @escaping @Sendable () -> Void) -> UUID {
        installExitHandler
        let id = UUID()
        exitActions.withLock { $0[id] = action }
        return id
    }

    public static func cancelAtExit(_ id: UUID) { _ = exitActions.withLock { $0.removeValue(forKey: id) } }

    /// Kills the group of every child still running when the test process exits, reaps it, and
    /// runs what `atExit` was given.
    private static let installExitHandler: Void = {
        atexit {
            let pids = ChildProcess.live.withLock { live in
                defer { live.removeAll() }
                return live
            }
            for pid in pids { kill(-pid, SIGKILL) }
            var status: Int32 = 0
            for pid in pids { while waitpid(pid, &status, 0) < 0 && errno == EINTR {} }
            let actions = ChildProcess.exitActions.withLock { actions in
                defer { actions.removeAll() }
                return actions.values
            }
            for action in actions { action() }
        }
    }()

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }
}

extension ChildProcess {
    /// Runs a command to its end and returns its exit status and what it wrote to standard output
    /// and standard error (together, in order). They go through a temporary file, not a pipe: a
    /// server the command leaves in the background may hold its descriptors open.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, directory: String? = nil
    ) async throws -> (status: Int32, output: String) {
        try await offThePool { try runBlocking(executable, arguments, environment: environment, directory: directory) }
    }

    /// `run`, holding the calling thread until the command ends: only for commands that end in
    /// milliseconds, where nothing can wait (a `defer`).
    public static func runBlocking(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, directory: String? = nil
    ) throws -> (status: Int32, output: String) {
        var template = Array("\(NSTemporaryDirectory())/runner-output-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        guard fd >= 0 else { throw Failure("mkstemp: errno \(errno)") }
        close(fd)
        let path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer { unlink(path) }
        let process = try ChildProcess(executable, arguments, environment: environment, directory: directory, stdout: .file(path), stderr: .file(path))
        _ = process.reap(blocking: true)
        return (process.terminationStatus, (try? String(contentsOfFile: path, encoding: .utf8)) ?? "")
    }
}
