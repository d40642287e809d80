/// Maps kind names to their definitions, in registration order.
public struct KindRegistry: Sendable {
    /// A name registered twice: refused, naming both sources.
    public struct DuplicateKind: Error, CustomStringConvertible {
        public var name: String
        public var existing: String
        public var added: String
        public var description: String {
            "A job kind named '\(name)' is already defined (\(existing)); \(added) defines it again."
        }
    }

    private var definitions: [String: KindDefinition] = [:]
    private var order: [String] = []

    public init() {}

    public init(_ definitions: [KindDefinition]) throws(DuplicateKind) {
        for definition in definitions { try register(definition) }
    }

    public mutating func register(_ definition: KindDefinition) throws(DuplicateKind) {
        if let existing = definitions[definition.name] {
            throw DuplicateKind(name: definition.name, existing: existing.source, added: definition.source)
        }
        definitions[definition.name] = definition
        order.append(definition.name)
    }

    /// Registers a compiled kind.
    public mutating func register<Kind: JobKind>(_ kind: Kind.Type) throws(DuplicateKind) {
        try register(KindDefinition(kind))
    }

    public func definition(named name: String) -> KindDefinition? { definitions[name] }

    /// The registered kinds, in registration order.
    public var all: [KindDefinition] { order.compactMap { definitions[$0] } }

    public var names: [String] { order }
}
