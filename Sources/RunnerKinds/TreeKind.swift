import Foundation
import RunnerKit

/// `tree`: a tree of labels (the Img.ly `data.json`), checked, measured and written normalized;
/// with `entries`, one child `entry` job per leaf.
public struct TreeKind: JobKind {
    public static let name = "tree"
    public static let summary = "Fetches a tree of labelled nodes, reports nodes, leaves and depth, and with entries fetches one entry per leaf."
    public static let parameters = [
        KindParameter("entries", type: .urlTemplate, "Fetch one entry job per leaf from this URL, {id} replaced by the leaf's id."),
    ]
    public static let accept: String? = "application/json"

    /// The URL template of one `entry` child per distinct leaf id, `{id}` replaced by the id; nil:
    /// no children.
    public let entries: String?

    /// A tree job's parameters. Unlike a job file's, `entries` is not checked here: a template that
    /// makes no URL leaves every child invalid, and the tree `failed`.
    public init(entries: String? = nil) { self.entries = entries }

    public init(fields: inout JobFields) throws(JobSpecError) {
        entries = try fields.string("entries")
        if let entries {
            _ = try JobDescriptor.validateURL(URLTemplate.fill(entries) { $0 == "id" ? "id" : nil }, field: "entries")
        }
    }

    public func run(in context: JobContext) async throws -> KindOutcome {
        let (document, fetch) = try await JSONPayload.fetchDocument(context, folder: "trees", expected: "a JSON tree")
        let status = JSONPayload.status(fetch)
        let size = JSONPayload.size(fetch)
        let tree = try await PayloadCheck.run(bytes: size) { _ in
            do {
                return try Tree(document)
            } catch {
                throw JobFailure.failed("the tree is malformed: \(error)", httpStatus: status)
            }
        }
        var children = ChildJobs()
        if let entries {
            var seen = Set<String>()
            let ids = tree.leafIDs.filter { seen.insert($0).inserted }
            children = ChildJobs(count: ids.count) { index in
                .success(ChildJob(kind: "entry", url: entries, [("id", .string(ids[index]))]))
            }
        }
        let details: [(key: String, value: JSONValue)] = [
            ("nodes", JSONValue(tree.nodes)),
            ("leaves", JSONValue(tree.leafIDs.count)),
            ("depth", JSONValue(tree.depth)),
        ]
        switch fetch {
        case .fetched(let response):
            // The normalized tree is what is stored: the record describes it, not the body.
            let normalized = try await PayloadCheck.run(bytes: size) { _ in JSONWriter.data(tree.normalized, pretty: true) + [0x0A] }
            return KindOutcome(
                .bytes(normalized, httpStatus: response.head.status),
                folder: "trees", fileExtension: "json", details: details, children: children)
        case .notModified:
            return KindOutcome(.notModified, folder: "trees", fileExtension: "json", details: details, children: children)
        }
    }
}

/// The tree contract: an array of nodes; a node has `label` and either `children` (nodes) or `id` (a leaf).
package struct Tree: Sendable {
    package struct Malformed: Error, CustomStringConvertible {
        package var description: String
    }

    /// Every node, inner and leaf.
    public private(set) var nodes = 0
    /// Leaf ids in document order.
    public private(set) var leafIDs: [String] = []
    /// Levels: top-level nodes are at depth 1; an empty tree has depth 0.
    public private(set) var depth = 0
    /// The tree with each node's members in the order label, id, children.
    public private(set) var normalized: JSONValue = .array([])

    package init(_ document: JSONValue) throws {
        guard case .array(let roots) = document else {
            throw Malformed(description: "the top level must be an array of nodes, not \(document.typeDescription)")
        }
        normalized = .array(try roots.enumerated().map { try visit($0.element, path: "\($0.offset + 1)", level: 1) })
    }

    private mutating func visit(_ node: JSONValue, path: String, level: Int) throws -> JSONValue {
        guard case .object = node else { throw Malformed(description: "node \(path) is \(node.typeDescription), not an object") }
        guard let label = node["label"]?.stringValue else { throw Malformed(description: "node \(path) has no string 'label'") }
        nodes += 1
        depth = max(depth, level)
        if let children = node["children"] {
            guard case .array(let list) = children else {
                throw Malformed(description: "node \(path) has 'children' that is \(children.typeDescription), not an array")
            }
            let visited = try list.enumerated().map { try visit($0.element, path: "\(path).\($0.offset + 1)", level: level + 1) }
            return .object([("label", .string(label)), ("children", .array(visited))])
        }
        let id: String
        switch node["id"] {
        case .string(let s)?: id = s
        case let value? where value.intValue != nil: id = String(value.intValue!)
        default: throw Malformed(description: "node \(path) ('\(label)') has neither 'children' nor a string 'id'")
        }
        leafIDs.append(id)
        return .object([("label", .string(label)), ("id", .string(id))])
    }
}
