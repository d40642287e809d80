import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// Runs the built `runner` binary, as a user would, and reads what it wrote.
struct RunnerBinary {
    struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// The binary next to the test bundle (both live in the build folder), or `RUNNER_BIN`.
    static let path: String = {
        if let override = ProcessInfo.processInfo.environment["RUNNER_BIN"] { return override }
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        return bundle.appendingPathComponent("runner").path
    }()

    /// Runs `runner ARGS…` in `directory`, with `input` on a pipe as standard input (else
    /// /dev/null); `beforeWait` gets the process once it started.
    @discardableResult
    static func run(
        _ arguments: [String], in directory: String, input: [UInt8]? = nil, environment: [String: String] = [:],
        beforeWait: (ChildProcess) async -> Void = { _ in }
    ) async throws -> Output {
        try await runExecutable(path, arguments, in: directory, input: input, environment: environment, beforeWait: beforeWait)
    }

    /// Runs another program the same way (the runner under strace, for instance); `stdin` is
    /// given as a file, `input` on a pipe.
    static func runExecutable(
        _ executable: String, _ arguments: [String], in directory: String, input: [UInt8]? = nil, stdin: String? = nil,
        environment: [String: String] = [:], beforeWait: (ChildProcess) async -> Void = { _ in }
    ) async throws -> Output {
        let stdoutPath = "\(directory)/.stdout-\(UUID().uuidString)"
        let stderrPath = "\(directory)/.stderr-\(UUID().uuidString)"
        let stdinPath = "\(directory)/.stdin-\(UUID().uuidString)"
        defer { for path in [stdoutPath, stderrPath, stdinPath] { unlink(path) } }
        var standardInput = ChildProcess.Stream.null
        if input != nil {
            standardInput = .pipe
        } else if let stdin {
            _ = FileManager.default.createFile(atPath: stdinPath, contents: Data(stdin.utf8))
            standardInput = .file(stdinPath)
        }
        let process = try ChildProcess(
            executable, arguments, environment: environment.isEmpty ? nil : ChildProcess.environment(adding: environment),
            directory: directory, stdin: standardInput, stdout: .file(stdoutPath), stderr: .file(stderrPath))
        defer { process.terminate() }
        if let writer = process.input, let input {
            // Written from a thread of its own: a pipe holds 64 KiB, and the runner reads as it goes.
            Thread.detachNewThread {
                try? writer.write(contentsOf: input)
                try? writer.close()
            }
        }
        await beforeWait(process)
        // A runner that does not end within a minute is a failure, not a reason to hang the suite.
        if await process.exitStatus(upTo: .seconds(60)) == nil {
            process.signal(SIGINT)
            if await process.exitStatus(upTo: .seconds(2)) == nil { process.terminate(grace: .zero) }
            Issue.record("\(executable) \(arguments.joined(separator: " ")) did not end within 60 s")
        }
        await process.waitUntilExit()
        return Output(
            status: process.terminationStatus,
            stdout: (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "")
    }
}

/// A test's world: a fixture server, a work folder, and helpers to write jobs and read results.
final class Workspace: @unchecked Sendable {
    let server = FixtureServer()
    let root: String

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("runner-e2e-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try server.start()
    }

    deinit {
        server.stop()
        try? FileManager.default.removeItem(atPath: root)
    }

    var base: String { server.baseURL }
    var out: String { "\(root)/out" }

    @discardableResult
    func write(_ name: String, _ text: String) -> String {
        let path = "\(root)/\(name)"
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        return path
    }

    /// Runs the binary in the work folder; `environment` is added to the test's own (never set in
    /// the test process, which other tests share).
    func run(
        _ arguments: [String], input: [UInt8]? = nil, environment: [String: String] = [:],
        beforeWait: (ChildProcess) async -> Void = { _ in }
    ) async throws -> RunnerBinary.Output {
        try await RunnerBinary.run(arguments, in: root, input: input, environment: environment, beforeWait: beforeWait)
    }

    /// The result record of a key, parsed.
    func record(_ key: String) throws -> JSONValue {
        let path = "\(out)/results/\(OutputStore.fileName(forKey: key)).json"
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Missing(what: "no record for \(key) at \(path)")
        }
        return try JSONParser.parse([UInt8](data))
    }

    func status(_ key: String) throws -> String? { try record(key)["status"]?.stringValue }

    func payload(_ relative: String) -> [UInt8]? {
        FileManager.default.contents(atPath: "\(out)/\(relative)").map { [UInt8]($0) }
    }

    /// Every file under out/, relative, sorted.
    func outputFiles() -> [String] {
        (FileManager.default.enumerator(atPath: out)?.allObjects as? [String] ?? []).filter { name in
            // The key locks' file, there once a job ran: no payload, no record.
            guard name != ".locks/keys" else { return false }
            var directory: ObjCBool = false
            return FileManager.default.fileExists(atPath: "\(out)/\(name)", isDirectory: &directory) && !directory.boolValue
        }.sorted()
    }

    /// Temporary files left anywhere under out/ (there must be none).
    func leftovers() -> [String] { outputFiles().filter { $0.split(separator: "/").last?.hasPrefix(".tmp-") == true } }

    struct Missing: Error, CustomStringConvertible { var what: String; var description: String { what } }
}

/// The HTTP client the end-to-end suite runs on: `RUNNER_HTTP`, as for the binary, else the standard one.
func testHTTPClient() throws -> HTTPClientKind {
    guard let name = ProcessInfo.processInfo.environment["RUNNER_HTTP"], !name.isEmpty else { return .standard }
    return try HTTPClientKind.named(name)
}
