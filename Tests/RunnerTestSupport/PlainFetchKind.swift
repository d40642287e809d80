import RunnerKit

/// The feeds' and watchers' test kind, `fetch`: fetches its URL as it is and stores what arrived
/// in `fetched/`.
public struct PlainFetchKind: JobKind {
    public static let name = "fetch"
    public static let summary = "Fetches a URL as it is (for tests)."
    public static let parameters: [KindParameter] = []

    public init(fields: inout JobFields) throws(JobSpecError) {}

    public func run(in context: JobContext) async throws -> KindOutcome {
        .fetched(try await context.fetch(folder: "fetched"), folder: "fetched", fileExtension: "bin")
    }
}
