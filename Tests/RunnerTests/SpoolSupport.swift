import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// A spool inside a `Workspace`, with watchers run as child processes of the test.
final class SpoolWorld: @unchecked Sendable {
    let w: Workspace
    let spool: Spool

    init() throws {
        w = try Workspace()
        spool = Spool(root: "\(w.root)/spool")
    }

    /// A spool inside an existing workspace (sharing its fixture server).
    init(workspace: Workspace) {
        w = workspace
        spool = Spool(root: "\(workspace.root)/spool")
    }

    var base: String { w.base }

    /// Writes a job file outside the spool, then renames it into inbox/ (as a producer should).
    @discardableResult
    func drop(_ name: String, _ text: String) throws -> String {
        try FileManager.default.createDirectory(atPath: spool.inbox, withIntermediateDirectories: true)
        let staging = w.write(".staging-\(name)", text)
        guard rename(staging, "\(spool.inbox)/\(name)") == 0 else { throw Workspace.Missing(what: "rename into inbox failed") }
        return name
    }

    func imageJob(_ key: String, query: String = "") -> String {
        #"{"kind": "image", "key": "\#(key)", "url": "\#(base)/images/png.png\#(query)", "timeout": 30}"#
    }

    /// Starts `runner watch` with `arguments`, stderr to `<name>.stderr` in the workspace, and
    /// stdout to `<name>.stdout` with `keepingStdout` (else nowhere).
    func startWatcher(
        _ arguments: [String] = [], name: String = "watch", environment: [String: String] = [:], keepingStdout: Bool = false
    ) throws -> ChildProcess {
        try ChildProcess(
            RunnerBinary.path, ["watch", "--spool", spool.root, "--out", w.out] + arguments,
            environment: environment.isEmpty ? nil : ChildProcess.environment(adding: environment), directory: w.root,
            stdout: keepingStdout ? .file("\(w.root)/\(name).stdout") : .null, stderr: .file("\(w.root)/\(name).stderr"))
    }

    func log(_ name: String = "watch") -> String {
        (try? String(contentsOfFile: "\(w.root)/\(name).stderr", encoding: .utf8)) ?? ""
    }

    /// Waits (polling every 5 ms) until `condition` holds, or `timeout` passed; returns whether it held.
    @discardableResult
    func wait(upTo timeout: Duration, _ condition: () async -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if await condition() { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return await condition()
    }

    /// Waits for a process to exit, up to `timeout`; returns its status, or nil if it still runs.
    func exit(of process: ChildProcess, upTo timeout: Duration) async -> Int32? {
        await process.exitStatus(upTo: timeout)
    }

    func names(_ folder: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
    }

    /// Job files (not what lies beside them) in done/ or failed/.
    func jobFiles(_ folder: String) -> [String] {
        names(folder).filter { !$0.hasSuffix(Spool.resultsSuffix) && !$0.hasSuffix(Spool.errorSuffix) }
    }

    /// Files in active/, in any watcher's folder.
    func activeFiles() -> [String] {
        names(spool.active).flatMap { watcher in names("\(spool.active)/\(watcher)") }
    }

    /// The records beside a file in done/ or failed/.
    func records(_ folder: String, _ name: String) -> [JSONValue] {
        guard let text = try? String(contentsOfFile: "\(folder)/\(name)\(Spool.resultsSuffix)", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONParser.parse(Array($0.utf8)) }
    }

    func text(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
}
