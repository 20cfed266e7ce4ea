// Logs and telemetry. Application Insights takes Entra ID tokens only (local auth disabled), so the
// instrumentation key in its connection string cannot send telemetry on its own.
param logAnalyticsName string
param appInsightsName string
param location string
param tags object
@description('Daily ingestion cap of the workspace, in GB: every purchase is traced (refusals too), so a flood of anonymous requests would otherwise become an unbounded bill. Past the cap, telemetry stops until the next UTC day; the store keeps selling.')
param dailyQuotaGb int = 1

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: 30
    workspaceCapping: {
      dailyQuotaGb: dailyQuotaGb
    }
    features: {
      disableLocalAuth: true
    }
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: appInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    DisableLocalAuth: true
  }
}

output appInsightsName string = appInsights.name
