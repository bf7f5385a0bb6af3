"""Scenes: interesting moments of a drive, found by SQL rules over the lake's views.

- `rules`: the rule files of sql/scenes/ and their parameters (params.yaml), checked against
  each other and run with the parameters bound, never pasted into the SQL;
- `camera_stats`: the frame brightness and change the camera rules read (no earlier layer
  decodes images);
- `catalog`: the hits of one drive padded, merged and clipped into scenes/catalog, the input
  of scene sets.

The Dagster asset is `bridge_lake.defs.scenes.scene_catalog`; nothing here imports Dagster.
"""
