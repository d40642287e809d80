import FixtureServer
import Foundation
import Testing

@Suite struct CatalogTests {
    /// Counts the tree by its documented definitions, independently of the literals.
    private func figures(_ nodes: [Any], level: Int = 1) -> (nodes: Int, leaves: [String], depth: Int) {
        var result = (nodes: 0, leaves: [String](), depth: 0)
        for case let node as [String: Any] in nodes {
            result.nodes += 1
            result.depth = max(result.depth, level)
            if let id = node["id"] as? String {
                result.leaves.append(id)
            }
            if let children = node["children"] as? [Any] {
                let sub = figures(children, level: level + 1)
                result.nodes += sub.nodes
                result.leaves += sub.leaves
                result.depth = max(result.depth, sub.depth)
            }
        }
        return result
    }

    @Test func treeFiguresMatchTheTree() throws {
        let tree = try #require(try json(Data(FixtureCatalog.treeJSON.utf8)) as? [Any])
        let counted = figures(tree)
        #expect(counted.nodes == FixtureCatalog.treeNodeCount)
        #expect(counted.leaves == FixtureCatalog.treeLeafIDs)
        #expect(counted.leaves.count == FixtureCatalog.treeLeafCount)
        #expect(counted.depth == FixtureCatalog.treeDepth)
        #expect((FixtureCatalog.treeNodeCount, FixtureCatalog.treeLeafCount, FixtureCatalog.treeDepth) == (14, 8, 4))
    }

    @Test func everyNodeHasALabelAndEitherChildrenOrAnID() throws {
        func check(_ nodes: [Any]) {
            for case let node as [String: Any] in nodes {
                #expect(node["label"] is String)
                #expect((node["children"] != nil) != (node["id"] != nil))
                if let children = node["children"] as? [Any] {
                    check(children)
                }
            }
        }
        check(try #require(try json(Data(FixtureCatalog.treeJSON.utf8)) as? [Any]))
    }

    @Test func missingEntriesAreLeaves() {
        #expect(FixtureCatalog.missingEntryIDs == ["imgly.B.2", "9e.A.2"])
        #expect(FixtureCatalog.missingEntryIDs.isSubset(of: FixtureCatalog.treeLeafIDs))
    }

    @Test(arguments: FixtureCatalog.treeLeafIDs + ["needs \"escaping\"\n"])
    func entryHasTheSeedShape(id: String) throws {
        let entry = try #require(try json(Data(FixtureCatalog.entryJSON(id: id).utf8)) as? [String: String])
        #expect(Set(entry.keys) == ["id", "createdAt", "createdBy", "lastModifiedAt", "lastModifiedBy", "description"])
        #expect(entry["id"] == id)
        #expect(entry["createdAt"]?.hasSuffix("Z") == true)
        #expect(FixtureCatalog.entryJSON(id: id) == FixtureCatalog.entryJSON(id: id))
    }

    @Test func imagesHaveDistinctSizesAndNames() {
        let images = FixtureCatalog.images
        #expect(images.count == 23)
        #expect(Set(images.map(\.name)).count == images.count)
        #expect(Set(images.map(\.width)).count == images.count)
        #expect(Set(images.map(\.height)).count == images.count)
        #expect(
            Set(images.map(\.format)) == ["png", "jpeg", "gif", "webp", "bmp", "tiff", "ico", "cur", "heic", "avif", "jxl"])
        let contentTypes = ["ico": "image/x-icon", "cur": "image/x-icon"]
        for image in images {
            #expect(image.bytes.count > 60, "\(image.name)")
            #expect(image.contentType == contentTypes[image.format, default: "image/\(image.format)"])
        }
        let exif = images.first { $0.name == "jpeg-exif.jpg" }
        #expect((exif?.bytes.count ?? 0) > 4000)
    }
}
