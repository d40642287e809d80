import Foundation
import RunnerTestSupport
import Testing

/// The examples of README.md and docs/ that are marked `console test` print what their page shows:
/// Tests/Docs/examples.sh runs them with the binary just built, against the fixture server it
/// starts (and PostgreSQL where a block needs it and initdb is installed), and prints a unified
/// diff for each one that differs. How a page marks an example: docs/contributing.md.
@Suite(.startsProcesses, .timeLimit(.minutes(5)))
struct DocExamplesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized.path

    /// The pages show the default HTTP client (the script unsets RUNNER_HTTP); CI's second pass on
    /// URLSession would run the same examples again to no purpose.
    static var onTheDefaultClient: Bool { ProcessInfo.processInfo.environment["RUNNER_HTTP"] != "urlsession" }

    @Test(.enabled(if: DocExamplesTests.onTheDefaultClient, "the pages show the default HTTP client"))
    func everyMarkedExamplePrintsWhatItsPageShows() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("runner-docs-test-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let log = "\(folder)/examples.log"
        let script = try ChildProcess(
            "/bin/bash", ["\(Self.root)/Tests/Docs/examples.sh"],
            environment: ChildProcess.environment(adding: ["RUNNER": RunnerBinary.path]),
            directory: Self.root, stdout: .file(log), stderr: .file(log))
        // The script takes some 15 s alone; a busy machine may take several times that. Past the
        // bound, SIGTERM lets it stop what it started (its trap) before its group is killed.
        if await script.exitStatus(upTo: .seconds(240)) == nil {
            script.terminate(grace: .seconds(10))
            Issue.record("Tests/Docs/examples.sh did not end within 240 s")
        }
        await script.waitUntilExit()
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(script.terminationStatus == 0, "Tests/Docs/examples.sh exited \(script.terminationStatus):\n\(output)")
        #expect(output.contains(" commands run, 0 differ from their page"), "\(output)")
    }
}
