"""A Tag run whose other team does not train (``policy.<tag>.to_train=false``, the ``tag-quick``
preset's runners) names that opponent as untrained in curves.png, not as a learning self-play
opponent."""

from gpu_envs.runs import curves


def test_a_policy_against_an_untrained_team_is_drawn_as_such(tmp_path):
    csv = tmp_path / "log" / "csv" / "version_0" / "metrics.csv"
    csv.parent.mkdir(parents=True)
    csv.write_text(
        "charts/runner/episodic_return,charts/tagger/episodic_return,charts/train_seconds,step\n"
        "4.0,4.0,0.3,400\n1.0,6.5,0.6,800\n"
    )
    (tmp_path / "total_config.yaml").write_text(
        "name: tag_continuous\n"
        "policy:\n  runner: {to_train: false}\n  tagger: {to_train: true}\n"
        "opponents: {share: 0.0}\n"
    )
    panels = {panel.policy: panel for panel in curves.figure_panels({"tag": [tmp_path]})}
    assert [line.label for line in panels["tagger"].lines] == [
        "'tagger' vs untrained 'runner' (to_train false)"
    ]
    assert [line.label for line in panels["runner"].lines] == [
        "'runner' vs learning 'tagger' (self-play)"
    ]
