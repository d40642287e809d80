import Foundation
import Glibc
import RunnerKit
import Synchronization

/// One run of an executable kind's program: in a process group of its own, its stdin written,
/// its stdout collected up to a cap and its stderr handed on line by line (to the job's
/// observers, through `JobContext.log`), all on a thread of its own (never a thread of the
/// concurrency pool), so a program that reads nothing or writes without end blocks nobody.
///
/// Cancelling the awaiting task sends SIGTERM to the group and SIGKILL a second later; when
/// the program exits, whatever else is left of its group is killed, so nothing it started
/// outlives it.
final class KindProcess: Sendable {
    /// The most bytes of stdout read; more ends the program.
    static let maxAnswerBytes = 16 << 20
    /// How long after SIGTERM the group gets SIGKILL.
    static let killGrace: Duration = .seconds(1)

    struct Outcome: Sendable {
        enum Ending: Sendable, Equatable {
            case exited(Int32)
            case signalled(Int32)
        }
        var ending: Ending
        var stdout: [UInt8]
        /// stdout passed `maxAnswerBytes`; the program was killed.
        var overflowed: Bool
        var lastErrorLine: String?
        /// The program was ended because the task was cancelled.
        var cancelled: Bool
    }

    struct SpawnError: Error, CustomStringConvertible {
        var description: String
    }

    let pid: pid_t
    private let cancelRequested = Atomic<Bool>(false)
    /// Whether the wake pipe is closed (the run is over); guards `cancel()`'s write.
    private let wakeClosed = Mutex<Bool>(false)
    private let wakeWrite: Int32
    private let wakeRead: Int32
    private let stdinFD: Int32
    private let stdoutFD: Int32
    private let stderrFD: Int32
    /// The runner's end of the lifeline (-1: none), closed when the run is over.
    private let lifelineFD: Int32

    // glibc functions the Glibc module does not show (they need _GNU_SOURCE), found at run time.
    private typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32
    private typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32
    private static let pipe2: Pipe2 = unsafeBitCast(symbol("pipe2"), to: Pipe2.self)
    private static let addChdir: AddChdir = unsafeBitCast(symbol("posix_spawn_file_actions_addchdir_np"), to: AddChdir.self)

    private typealias PidfdOpen = @convention(c) (pid_t, UInt32) -> Int32
    /// `pidfd_open` (glibc 2.36, Linux 5.3): a descriptor that polls readable when the program
    /// exits. Without it the exit is noticed by polling every 20 ms.
    private static let pidfdOpen: PidfdOpen? = {
        guard let handle = dlopen(nil, RTLD_NOW), let found = dlsym(handle, "pidfd_open") else { return nil }
        return unsafeBitCast(found, to: PidfdOpen.self)
    }()

    private static func symbol(_ name: String) -> UnsafeMutableRawPointer {
        guard let handle = dlopen(nil, RTLD_NOW), let found = dlsym(handle, name) else {
            fatalError("the C library lacks \(name) (glibc 2.29 or later is needed)")
        }
        return found
    }

    /// A program that exits without reading its stdin must not end the runner: writes to its
    /// pipe fail with EPIPE instead of raising SIGPIPE. (Programs get the default back.)
    private static let ignoreBrokenPipes: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// Process ids of running programs, for tests that check nothing outlives its job.
    static let running = Mutex<Set<pid_t>>([])

    /// Starts `command` in `directory`, with the runner's environment (less its secrets:
    /// `ChildEnvironment`) and `environment` over it.
    /// With `lifeline`, the program's descriptor 3 is the read end of a pipe whose other end
    /// only this process holds: it reads end-of-file once the runner is gone, however it ended.
    init(command: [String], directory: String, environment: [String: String] = [:], lifeline: Bool = false) throws(SpawnError) {
        _ = Self.ignoreBrokenPipes
        var pipes: [Int32] = []
        func pipePair() throws(SpawnError) -> (Int32, Int32) {
            var fds: [Int32] = [0, 0]
            guard Self.pipe2(&fds, O_CLOEXEC) == 0 else { throw SpawnError(description: "cannot make a pipe: \(String(cString: strerror(errno)))") }
            pipes += fds
            return (fds[0], fds[1])
        }
        let closeAll = { for fd in pipes { close(fd) } }
        let input: (Int32, Int32), output: (Int32, Int32), errors: (Int32, Int32), wake: (Int32, Int32)
        var line: (Int32, Int32)?
        do {
            input = try pipePair()
            output = try pipePair()
            errors = try pipePair()
            wake = try pipePair()
            if lifeline { line = try pipePair() }
        } catch {
            closeAll()
            throw error
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input.0, 0)
        posix_spawn_file_actions_adddup2(&actions, output.1, 1)
        posix_spawn_file_actions_adddup2(&actions, errors.1, 2)
        if let line { posix_spawn_file_actions_adddup2(&actions, line.0, 3) }
        guard Self.addChdir(&actions, directory) == 0 else {
            closeAll()
            throw SpawnError(description: "cannot change to the folder \(directory)")
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setpgroup(&attributes, 0)
        var defaultSignals = sigset_t()
        sigemptyset(&defaultSignals)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD] { sigaddset(&defaultSignals, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaultSignals)
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) }
        argv.append(nil)
        defer { for arg in argv { free(arg) } }
        // The runner's environment without its secrets (ChildEnvironment), `environment` over it.
        var envp: [UnsafeMutablePointer<CChar>?] = ChildEnvironment.make(adding: environment).map { strdup("\($0.key)=\($0.value)") }
        envp.append(nil)
        defer { for entry in envp { free(entry) } }
        var child: pid_t = 0
        let status = posix_spawnp(&child, command[0], &actions, &attributes, argv, envp)
        close(input.0)
        close(output.1)
        close(errors.1)
        if let line { close(line.0) }
        guard status == 0 else {
            for fd in [input.1, output.0, errors.0, wake.0, wake.1, line?.1 ?? -1] where fd >= 0 { close(fd) }
            throw SpawnError(description: "cannot start \(command[0]): \(String(cString: strerror(status)))")
        }
        pid = child
        Self.running.withLock { _ = $0.insert(child) }
        stdinFD = input.1
        stdoutFD = output.0
        stderrFD = errors.0
        wakeRead = wake.0
        wakeWrite = wake.1
        lifelineFD = line?.1 ?? -1
        for fd in [stdinFD, stdoutFD, stderrFD, wakeRead] {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
    }

    /// Asks the program to stop: SIGTERM to its group now, SIGKILL a second later.
    func cancel() {
        cancelRequested.store(true, ordering: .relaxed)
        wakeClosed.withLock { closed in
            guard !closed else { return }
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
        }
    }

    /// Feeds `input`, collects the answer and waits for the program, on a thread of its own.
    /// `stderrLine` gets each line of stderr as it arrives.
    func run(input: [UInt8], stderrLine: @escaping @Sendable (String) -> Void) async -> Outcome {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                let thread = Thread { [self] in
                    continuation.resume(returning: self.drive(input: input, stderrLine: stderrLine))
                }
                thread.name = "runner-kind-\(pid)"
                thread.start()
            }
        } onCancel: {
            self.cancel()
        }
    }

    private func drive(input: [UInt8], stderrLine: @Sendable (String) -> Void) -> Outcome {
        var written = 0
        var stdinOpen = true
        var stdoutOpen = true
        var stderrOpen = true
        var stdout: [UInt8] = []
        var overflowed = false
        var pendingError: [UInt8] = []
        var lastErrorLine: String?
        var termSentAt: ContinuousClock.Instant?
        var killed = false
        var exited = false
        var cancelled = false
        var buffer = [UInt8](repeating: 0, count: 65536)
        let exitFD: Int32 = Self.pidfdOpen.map { $0(pid, 0) } ?? -1
        defer { if exitFD >= 0 { close(exitFD) } }

        func killGroup(_ signal: Int32) { _ = kill(-pid, signal) }
        func emitErrorLines(final: Bool) {
            while let newline = pendingError.firstIndex(of: 0x0A) {
                let line = String(decoding: pendingError[..<newline], as: UTF8.self)
                pendingError.removeSubrange(...newline)
                if !line.isEmpty { lastErrorLine = line }
                stderrLine(line)
            }
            if pendingError.count > 8192 || (final && !pendingError.isEmpty) {
                let line = String(decoding: pendingError, as: UTF8.self)
                pendingError.removeAll()
                lastErrorLine = line
                stderrLine(line)
            }
        }
        if input.isEmpty { close(stdinFD); stdinOpen = false }

        while stdoutOpen || stderrOpen || !exited {
            if !cancelled && cancelRequested.load(ordering: .relaxed) {
                cancelled = true
                killGroup(SIGTERM)
                termSentAt = .now
            }
            if let sent = termSentAt, !killed, sent.duration(to: .now) >= Self.killGrace {
                killGroup(SIGKILL)
                killed = true
            }
            if !exited {
                // Seen without reaping: while the leader is a zombie its group id cannot be reused.
                var info = siginfo_t()
                if waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info._sifields._sigchld.si_pid == pid {
                    exited = true
                    // Whatever the program started dies with it; then its pipes reach end of file.
                    killGroup(SIGKILL)
                    if stdinOpen { close(stdinFD); stdinOpen = false }
                }
            }
            if exited && !stdoutOpen && !stderrOpen { break }
            var fds: [pollfd] = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            if exitFD >= 0 && !exited { fds.append(pollfd(fd: exitFD, events: Int16(POLLIN), revents: 0)) }
            if stdinOpen { fds.append(pollfd(fd: stdinFD, events: Int16(POLLOUT), revents: 0)) }
            if stdoutOpen { fds.append(pollfd(fd: stdoutFD, events: Int16(POLLIN), revents: 0)) }
            if stderrOpen { fds.append(pollfd(fd: stderrFD, events: Int16(POLLIN), revents: 0)) }
            // With a pidfd the exit wakes the poll; without, it is noticed by polling waitid.
            var timeout: Int32 = exitFD >= 0 || exited ? -1 : 20
            if let sent = termSentAt, !killed {
                let left = Self.killGrace - sent.duration(to: .now)
                timeout = max(1, Int32(clamping: left.inMilliseconds) + 1)
            }
            _ = poll(&fds, nfds_t(fds.count), timeout)
            for entry in fds where entry.revents != 0 {
                switch entry.fd {
                case wakeRead:
                    _ = read(wakeRead, &buffer, buffer.count)
                case exitFD:
                    break  // the waitid at the top of the loop takes it
                case stdinFD where stdinOpen:
                    let n = input.withUnsafeBytes { raw in
                        write(stdinFD, raw.baseAddress! + written, min(raw.count - written, 65536))
                    }
                    if n > 0 { written += n }
                    if (n < 0 && errno != EAGAIN && errno != EINTR) || written == input.count {
                        close(stdinFD)
                        stdinOpen = false
                    }
                case stdoutFD where stdoutOpen:
                    let n = read(stdoutFD, &buffer, buffer.count)
                    if n > 0 {
                        if !overflowed {
                            stdout.append(contentsOf: buffer[..<n])
                            if stdout.count > Self.maxAnswerBytes {
                                overflowed = true
                                stdout = []
                                killGroup(SIGKILL)
                                killed = true
                            }
                        }
                    } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                        close(stdoutFD)
                        stdoutOpen = false
                    }
                case stderrFD where stderrOpen:
                    let n = read(stderrFD, &buffer, buffer.count)
                    if n > 0 {
                        pendingError.append(contentsOf: buffer[..<n])
                        emitErrorLines(final: false)
                    } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                        close(stderrFD)
                        stderrOpen = false
                    }
                default:
                    break
                }
            }
        }
        emitErrorLines(final: true)
        if stdinOpen { close(stdinFD) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        Self.running.withLock { _ = $0.remove(pid) }
        if lifelineFD >= 0 { close(lifelineFD) }
        wakeClosed.withLock { closed in
            close(wakeRead)
            close(wakeWrite)
            closed = true
        }
        let ending: Outcome.Ending
        if status & 0x7F == 0 {
            ending = .exited((status >> 8) & 0xFF)
        } else {
            ending = .signalled(status & 0x7F)
        }
        return Outcome(ending: ending, stdout: stdout, overflowed: overflowed, lastErrorLine: lastErrorLine, cancelled: cancelled)
    }
}
