import FixtureServer
import RunnerKinds
import RunnerKit
import Testing

@Suite struct TreeTests {
    @Test func theSeedTreeHasItsFigures() throws {
        let tree = try Tree(JSONParser.parse(FixtureCatalog.treeJSON))
        #expect(tree.nodes == FixtureCatalog.treeNodeCount)
        #expect(tree.leafIDs == FixtureCatalog.treeLeafIDs)
        #expect(tree.depth == FixtureCatalog.treeDepth)
    }

    @Test func emptyAndDeepTrees() throws {
        let empty = try Tree(JSONParser.parse("[]"))
        #expect(empty.nodes == 0 && empty.depth == 0 && empty.leafIDs.isEmpty)
        var json = #"{"label": "leaf", "id": "x"}"#
        for level in 0..<50 { json = #"{"label": "n\#(level)", "children": [\#(json)]}"# }
        let deep = try Tree(JSONParser.parse("[\(json)]"))
        #expect(deep.depth == 51 && deep.nodes == 51 && deep.leafIDs == ["x"])
    }

    @Test func normalizedOrderIsLabelIdChildren() throws {
        let tree = try Tree(JSONParser.parse(#"[{"children": [{"id": 7, "label": "b", "extra": 1}], "label": "a"}]"#))
        #expect(JSONWriter.string(tree.normalized) == #"[{"label":"a","children":[{"label":"b","id":"7"}]}]"#)
        // As docs/job-files.md shows it stored.
        let stored = String(decoding: JSONWriter.data(tree.normalized, pretty: true), as: UTF8.self)
        #expect(stored == """
            [
              {
                "label": "a",
                "children": [
                  {
                    "label": "b",
                    "id": "7"
                  }
                ]
              }
            ]
            """)
        #expect(tree.nodes == 2 && tree.leafIDs.count == 1 && tree.depth == 2)
    }

    @Test(arguments: [
        (#"{"label": "x"}"#, "the top level must be an array of nodes, not an object"),
        (#"[{"id": "1"}]"#, "node 1 has no string 'label'"),
        (#"[{"label": "a", "children": [{"label": "b"}]}]"#, "node 1.1 ('b') has neither 'children' nor a string 'id'"),
        (#"[{"label": "a", "children": {}}]"#, "node 1 has 'children' that is an object, not an array"),
        (#"[3]"#, "node 1 is a number, not an object"),
    ])
    func malformedTreesSayWhere(json: String, message: String) throws {
        #expect(throws: Tree.Malformed.self) { try Tree(JSONParser.parse(json)) }
        do {
            _ = try Tree(JSONParser.parse(json))
        } catch {
            #expect("\(error)" == message)
        }
    }
}
