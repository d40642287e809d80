import FixtureServer
import Foundation
import Glibc

/// `runner demo`: the example jobs of Jobs/demo (built in, `DemoJobs`) against the built-in
/// fixture server, started in-process on a free loopback port, so the demo needs no internet
/// and no checkout.
enum DemoCommand {
    /// Demo job files name the fixture server by this base URL; the demo puts the real one in.
    static let placeholder = "http://fixture.test"

    static let jobs = CommandOption<String?>.text(
        "jobs", "DIR", help: "Folder of demo job files; their URLs start with \(placeholder).", defaultText: "the built-in copy of Jobs/demo")

    static let spec: CommandSpec = CommandSpec(
        name: "demo",
        summary: "Run the demo jobs (a built-in copy of Jobs/demo) against the built-in fixture server on loopback.",
        options: [
            jobs.spec,
            EngineCommandOptions.out.spec, EngineCommandOptions.concurrency.spec, EngineCommandOptions.http.spec, KindOptions.config.spec,
            RunCommand.json.spec,
        ],
        run: { arguments in
            let options: RunCommand.Options
            do { options = try RunCommand.Options(arguments) } catch { return Runner.usageError(error, spec: spec) }
            let given = (try? arguments[jobs]) ?? nil
            let folder = given ?? "Jobs/demo"
            let builtIn = given == nil
            let names = builtIn
                ? DemoJobs.files.map(\.name)
                : ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
                    .filter { $0.hasSuffix(".json") || $0.hasSuffix(".jsonl") }.sorted()
            guard !names.isEmpty else {
                Console.error("no demo job files (*.json, *.jsonl) in '\(folder)'")
                return 2
            }
            let server = FixtureServer()
            do {
                try server.start()
            } catch {
                Console.error("the fixture server could not start: \(error)")
                return 1
            }
            defer { server.stop() }
            let staging = FileManager.default.temporaryDirectory.appendingPathComponent("runner-demo-\(getpid())").path
            defer { try? FileManager.default.removeItem(atPath: staging) }
            var files: [String] = []
            var displayNames: [String: String] = [:]
            do {
                try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
                for name in names {
                    let text = try builtIn
                        ? DemoJobs.files.first { $0.name == name }!.text
                        : String(contentsOfFile: "\(folder)/\(name)", encoding: .utf8)
                    let path = "\(staging)/\(name)"
                    try text.replacingOccurrences(of: placeholder, with: server.baseURL).write(toFile: path, atomically: true, encoding: .utf8)
                    files.append(path)
                    displayNames[path] = "\(folder)/\(name)"
                }
            } catch {
                Console.error("could not prepare the demo jobs: \(error)")
                return 1
            }
            if !options.json {
                let running = builtIn
                    ? "the built-in copy of Jobs/demo: \(names.joined(separator: ", "))"
                    : names.map { "\(folder)/\($0)" }.joined(separator: ", ")
                Console.out("Fixture server on \(server.baseURL); running \(running)\n")
            }
            return await RunCommand.execute(files: files, options: options, displayNames: displayNames)
        })
}

/// `runner fixture-server`: the fixture server on its own, for tests and trying things by hand.
enum FixtureServerCommand {
    static let host = CommandOption<String>.text("host", "ADDRESS", default: "127.0.0.1", help: "Address to listen on.")
    static let port = CommandOption<Int>.int("port", default: 0, range: 0...65_535, help: "Port to listen on; 0 picks a free one.")

    static let spec: CommandSpec = CommandSpec(
        name: "fixture-server",
        summary: "Serve the fixture payloads and fault modes (for tests and the demo) until interrupted.",
        options: [host.spec, port.spec],
        run: { arguments in
            let server: FixtureServer
            do {
                server = FixtureServer(host: try arguments[host], port: UInt16(try arguments[port]))
            } catch {
                return Runner.usageError(error, spec: spec)
            }
            do {
                try server.start()
            } catch {
                Console.error("the fixture server could not start: \(error)")
                return 1
            }
            Console.out("Fixture server listening on \(server.baseURL)")
            _ = await SignalWatcher.wait(for: [SIGINT, SIGTERM])
            server.stop()
            return 0
        })
}
