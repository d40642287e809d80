import FixtureServer
import Foundation
import RunnerKinds
import RunnerKit
import Testing

/// A result's details read as Swift values, from a result the engine returns and from its record
/// in `results/`.
@Suite(.timeLimit(.minutes(1)))
struct ResultDetailsTests {
    @Test func detailsReadByNameAsTypedValues() async throws {
        let server = FixtureServer()
        try server.start()
        defer { server.stop() }
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("details-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let engine = try JobEngine(
            configuration: .init(registry: BuiltInKinds.registry(), store: try OutputStore(root: out), http: URLSessionFetcher()))
        let png = try #require(FixtureCatalog.images.first { $0.name == "png.png" })

        let image = await engine.run(JobDescriptor(ImageKind(), key: "image:png", url: URL(string: "\(server.baseURL)/images/png.png")!))
        #expect(image.status == .succeeded, "\(image.error ?? "")")
        #expect(image.detail("format")?.stringValue == "png")
        #expect(image.detail("width")?.intValue == png.width)
        #expect(image.detail("height")?.doubleValue == Double(png.height))
        #expect(image.detail("width")?.stringValue == nil, "a number is no string")
        #expect(image.detail("nothing") == nil)

        // Read back from results/ as a program reading the output would.
        let record = try #require(FileManager.default.contents(atPath: "\(out)/\(engine.store.recordPath(forKey: "image:png"))"))
        let stored = try JSONDecoder().decode(JobResult.self, from: record)
        #expect(stored.detail("width")?.intValue == png.width && stored.detail("format")?.stringValue == "png")

        let tree = await engine.run(JobDescriptor(TreeKind(entries: "\(server.baseURL)/entries/{id}.json"), url: URL(string: "\(server.baseURL)/data.json")!))
        #expect(tree.detail("leaves")?.intValue == FixtureCatalog.treeLeafCount)
        #expect(tree.detail("children")?["notFound"]?.intValue == FixtureCatalog.missingEntryIDs.count)
        #expect(tree.detail("children")?["succeeded"]?.intValue == FixtureCatalog.treeLeafCount - FixtureCatalog.missingEntryIDs.count)
    }
}
