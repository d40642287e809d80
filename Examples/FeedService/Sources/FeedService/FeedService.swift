import FixtureServer
import Foundation
import RunnerKinds
import RunnerKit

/// A small service around the engine: jobs arrive on an async stream from a producer task,
/// each result is printed as its job ends, one job is cancelled by key, and the engine is shut
/// down at the end.
///
///     FeedService [BASE-URL]
///
/// BASE-URL is a server with the fixture server's routes (`runner fixture-server`); without
/// it, the service starts the fixture server on loopback, so it needs no internet.
@main
struct FeedService {
    static func main() async throws {
        let server = FixtureServer()
        let base: String
        if let argument = CommandLine.arguments.dropFirst().first {
            base = argument
        } else {
            try server.start()
            base = server.baseURL
        }
        defer { server.stop() }

        var registry = BuiltInKinds.registry()
        try registry.register(CountKind.self)
        var configuration = JobEngine.Configuration.run(registry: registry)
        configuration.out = "out"
        configuration.jobDefaults.timeout = .seconds(30)   // the slow job waits until it is cancelled
        let engine = try JobEngine(configuration: configuration)

        // The producer: a queue, a socket or a database in a real service.
        let (jobs, input) = AsyncStream.makeStream(of: JobDescriptor.self)
        Task {
            defer { input.finish() }   // the results end once the input has and its jobs have
            input.yield(try JobDescriptor(EntryKind(id: "imgly.A.2"), key: "report:slow", url: "\(base)/entries/{id}.json?hang=1"))
            for id in ["imgly.A.1", "imgly.B.1", "imgly.B.2", "gone"] {
                input.yield(try JobDescriptor(EntryKind(id: id), url: "\(base)/entries/{id}.json"))
            }
            input.yield(try JobDescriptor(ImageKind(), key: "image:png", url: "\(base)/images/png.png"))
            input.yield(try JobDescriptor(CountKind(atLeast: 5), key: "count:images", url: "\(base)/images.json"))
        }

        var cancelled = false
        for await result in engine.results(for: jobs) {
            print(result.key, result.status, result.error ?? result.output ?? "")
            if !cancelled {
                // The slow job was handed to the engine before any other: it runs or waits now.
                cancelled = engine.cancel(key: "report:slow", reason: "the report is no longer needed")
            }
        }
        await engine.shutdown(reason: "the service is stopping")
        print("records in \(configuration.out)/results/")
    }
}
